// The agentstream web chat: the conversation's history (both sides) on load, then the answers as
// delivery streams them. Each SSE frame carries a message's whole text, so a frame replaces the
// bubble's content; its id lets the browser resume after a reconnect (Last-Event-ID), on any replica.
(function () {
  "use strict";
  const parts = location.pathname.split("/").filter(Boolean);
  const chatId = decodeURIComponent(parts[parts.length - 1]);
  const root = location.pathname.replace(/\/web\/[^/]+\/?$/, "");
  const api = root + "/v1/web/" + encodeURIComponent(chatId);
  const list = document.getElementById("messages");
  const status = document.getElementById("status");
  const input = document.getElementById("text");
  const stop = document.getElementById("stop");
  document.getElementById("title").textContent = "agentstream · " + chatId;

  // The session token arrives in the URL fragment (never sent to a server), is kept for this tab
  // only, and is taken out of the address bar so it is not copied along with the URL.
  const tokenKey = "agentstream.web.token." + chatId;
  const fromLink = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromLink) {
    sessionStorage.setItem(tokenKey, fromLink);
    history.replaceState(null, "", location.pathname + location.search);
  }
  const token = sessionStorage.getItem(tokenKey);
  if (!token) {
    status.textContent = "no session: open the chat link you were given";
    input.disabled = true;
    document.getElementById("send").disabled = true;
    return;
  }
  const auth = { "authorization": "Bearer " + token };
  const liveRuns = new Set();  // runs whose frames replaced what the history showed of them

  function newId() {
    return (window.crypto && crypto.randomUUID) ? crypto.randomUUID()
      : Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function scrollDown() { list.scrollTop = list.scrollHeight; }

  function bubble(kind, text, runId) {
    const el = document.createElement("div");
    el.className = "msg " + kind;
    el.textContent = text;
    if (runId) el.dataset.run = runId;
    return el;
  }

  function place(el, runId) {
    // A run's messages go below that run's last message shown (its question), else at the end.
    const same = runId ? list.querySelectorAll('[data-run="' + CSS.escape(runId) + '"]') : [];
    if (same.length) same[same.length - 1].after(el); else list.appendChild(el);
    scrollDown();
  }

  function setEnding(el, ending) {
    el.className = el.className.replace(/\bending-\w+/g, "").trim();
    if (ending) el.classList.add("ending-" + ending);
  }

  function updateStop() { stop.hidden = !list.querySelector(".msg.bot.streaming"); }

  function render(frame) {
    let el = list.querySelector('[data-message-id="' + CSS.escape(frame.message_id) + '"]');
    if (!el) {
      if (frame.run_id && !liveRuns.has(frame.run_id)) {
        liveRuns.add(frame.run_id);
        list.querySelectorAll('.msg.bot.history[data-run="' + CSS.escape(frame.run_id) + '"]')
          .forEach(function (old) { old.remove(); });
      }
      el = bubble("bot", "", frame.run_id);
      el.dataset.messageId = frame.message_id;
      place(el, frame.run_id);
    }
    if (frame.markup === "html") {
      el.innerHTML = frame.text;  // sanitised by delivery's renderer: only its own tags, no raw HTML
      el.classList.remove("plain");
    } else {
      el.textContent = frame.text;
      el.classList.add("plain");
    }
    el.classList.toggle("tool", frame.kind === "tool");
    el.classList.toggle("streaming", !frame.final);
    el.classList.toggle("final", frame.final);
    setEnding(el, frame.ending);
    window.agentstreamHighlight(el);
    updateStop();
    scrollDown();
  }

  async function loadHistory() {
    try {
      const res = await fetch(api + "/history", { headers: auth });
      if (!res.ok) {
        status.textContent = "history unavailable (" + res.status + ")";
        return;
      }
      (await res.json()).items.forEach(function (item) {
        const el = bubble(item.role === "user" ? "user" : "bot history final plain", item.text, item.run_id);
        if (item.role !== "user" && item.markup === "html") {
          el.innerHTML = item.text;  // sanitised by delivery's renderer, as a frame's
          el.classList.remove("plain");
        }
        setEnding(el, item.ending);
        list.appendChild(el);
      });
      window.agentstreamHighlight(list);
      scrollDown();
    } catch (err) {
      status.textContent = "history unavailable: " + err;
    }
  }

  function connect() {
    const events = new EventSource(api + "/events?token=" + encodeURIComponent(token));
    events.onopen = function () { status.textContent = "connected"; };
    events.onerror = function () {
      // A refused stream (401/403) is not retried by the browser: the session is over.
      status.textContent = events.readyState === EventSource.CLOSED
        ? "session invalid or expired: open a new chat link" : "reconnecting…";
    };
    events.onmessage = function (ev) { render(JSON.parse(ev.data)); };
  }

  async function post(text) {
    return fetch(api + "/messages", {
      method: "POST",
      headers: Object.assign({ "content-type": "application/json" }, auth),
      body: JSON.stringify({ id: newId(), text: text }),
    });
  }

  function refused(res) {
    if (res.status === 401 || res.status === 403) {
      status.textContent = "not sent: session invalid or expired, open a new chat link";
    } else if (!res.ok) {
      status.textContent = "not sent (" + res.status + ")";
    }
  }

  document.getElementById("composer").addEventListener("submit", async function (ev) {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    const mine = bubble("user", text);
    list.appendChild(mine);
    scrollDown();
    try {
      const res = await post(text);
      mine.classList.add(res.ok ? "accepted" : "refused");
      refused(res);
    } catch (err) {
      mine.classList.add("refused");
      status.textContent = "not sent: " + err;
    }
  });

  stop.addEventListener("click", async function () {
    // The same command a user can type: ingress turns `/stop` into an interrupt of the current run.
    stop.disabled = true;
    try {
      const res = await post("/stop");
      refused(res);
    } catch (err) {
      status.textContent = "stop not sent: " + err;
    } finally {
      stop.disabled = false;
    }
  });

  loadHistory().then(connect);
})();
