// The agentstream web chat: the chat's history (both sides, every conversation of it) on load, then
// the answers as delivery streams them. Each SSE frame carries a message's whole text, so a frame
// replaces the bubble's content; its id lets the browser resume after a reconnect (Last-Event-ID), on
// any replica. History and frames are shown by the same code: both carry delivery's rendering
// (`markup: "html"`, sanitised by its renderer) or plain text.
(function () {
  "use strict";
  const parts = location.pathname.split("/").filter(Boolean);
  const chatId = decodeURIComponent(parts[parts.length - 1]);
  const root = location.pathname.replace(/\/web\/[^/]+\/?$/, "");
  const api = root + "/v1/web/" + encodeURIComponent(chatId);
  const $ = function (id) { return document.getElementById(id); };
  const list = $("messages");
  const empty = $("empty");
  const status = $("status");
  const input = $("text");
  const send = $("send");
  const stop = $("stop");
  const composer = $("composer");
  const conversations = $("conversations");
  const sidebar = $("sidebar");
  $("title").textContent = "agentstream · " + chatId;

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
    send.disabled = true;
    $("new-chat").disabled = true;
    return;
  }
  const auth = { "authorization": "Bearer " + token };
  const liveRuns = new Set();  // runs whose frames replaced what the history showed of them

  // Conversations: the chat's history sessions (`/new` starts one). Only the newest takes messages;
  // an earlier one is shown read-only.
  const sessions = [];  // {id, label}, oldest first
  let current = "";  // the conversation new messages go to
  let viewing = "";  // the conversation shown

  function newId() {
    return (window.crypto && crypto.randomUUID) ? crypto.randomUUID()
      : Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function scrollDown() { list.scrollTop = list.scrollHeight; }

  // -- bubbles --------------------------------------------------------------------
  function bubble(kind, runId, session) {
    const el = document.createElement("div");
    el.className = "msg " + kind;
    const body = document.createElement("div");
    body.className = "body";
    el.appendChild(body);
    if (kind.indexOf("bot") === 0) el.appendChild(copyButton(body));
    if (runId) el.dataset.run = runId;
    el.dataset.session = session;
    el.hidden = session !== viewing;
    return el;
  }

  function fill(el, text, markup) {
    // The one way a message's text is shown, live or from history.
    const body = el.querySelector(".body");
    if (markup === "html") {
      body.innerHTML = text;  // sanitised by delivery's renderer: only its own tags, no raw HTML
      el.classList.remove("plain");
    } else {
      body.textContent = text;
      el.classList.add("plain");
    }
    window.agentstreamHighlight(body);
  }

  function copyButton(body) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "copy";
    button.title = "Copy";
    button.setAttribute("aria-label", "Copy answer");
    button.addEventListener("click", async function () {
      try {
        await navigator.clipboard.writeText(body.innerText);
        button.classList.add("copied");
        setTimeout(function () { button.classList.remove("copied"); }, 1500);
      } catch (err) {
        status.textContent = "copy failed: " + err;
      }
    });
    return button;
  }

  function place(el, runId) {
    // A run's messages go below that run's last message shown (its question), else at the end.
    const same = runId ? list.querySelectorAll('[data-run="' + CSS.escape(runId) + '"]') : [];
    if (same.length) same[same.length - 1].after(el); else list.appendChild(el);
    updateEmpty();
    scrollDown();
  }

  function setEnding(el, ending) {
    el.className = el.className.replace(/\bending-\w+/g, "").trim();
    if (ending) el.classList.add("ending-" + ending);
  }

  function updateStop() { stop.hidden = !list.querySelector(".msg.bot.streaming"); }

  function updateEmpty() { empty.hidden = !!list.querySelector(".msg:not([hidden])"); }

  function render(frame) {
    let el = list.querySelector('[data-message-id="' + CSS.escape(frame.message_id) + '"]');
    if (!el) {
      let session = current;
      if (frame.run_id && !liveRuns.has(frame.run_id)) {
        liveRuns.add(frame.run_id);
        list.querySelectorAll('.msg.bot.history[data-run="' + CSS.escape(frame.run_id) + '"]')
          .forEach(function (old) { session = old.dataset.session; old.remove(); });
      }
      const earlier = frame.run_id && list.querySelector('[data-run="' + CSS.escape(frame.run_id) + '"]');
      el = bubble("bot", frame.run_id, earlier ? earlier.dataset.session : session);
      el.dataset.messageId = frame.message_id;
      place(el, frame.run_id);
    }
    fill(el, frame.text, frame.markup);
    el.classList.toggle("tool", frame.kind === "tool");
    el.classList.toggle("streaming", !frame.final);
    el.classList.toggle("final", frame.final);
    setEnding(el, frame.ending);
    updateStop();
    scrollDown();
  }

  // -- conversations --------------------------------------------------------------
  function addSession(id, label) {
    sessions.push({ id: id, label: label });
    current = id;
  }

  function labelOf(session) {
    const first = list.querySelector('.msg.user[data-session="' + CSS.escape(session.id) + '"] .body');
    const text = first ? first.textContent.replace(/\s+/g, " ").trim() : "";
    return text ? (text.length > 40 ? text.slice(0, 39) + "…" : text) : session.label;
  }

  function showConversations() {
    conversations.replaceChildren();
    sessions.slice().reverse().forEach(function (session) {
      const li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = labelOf(session);
      button.setAttribute("aria-current", session.id === viewing ? "true" : "false");
      button.addEventListener("click", function () { view(session.id); });
      li.appendChild(button);
      conversations.appendChild(li);
    });
  }

  function view(id) {
    viewing = id;
    list.querySelectorAll(".msg").forEach(function (el) { el.hidden = el.dataset.session !== id; });
    const writable = id === current;
    input.disabled = !writable;
    send.disabled = !writable;
    input.placeholder = writable ? "Message" : "An earlier conversation (read only): pick the newest to write";
    updateEmpty();
    showConversations();
    sidebar.classList.remove("open");
    $("menu").setAttribute("aria-expanded", "false");
    scrollDown();
  }

  // -- history --------------------------------------------------------------------
  async function loadHistory() {
    try {
      const res = await fetch(api + "/history", { headers: auth });
      if (!res.ok) {
        status.textContent = "history unavailable (" + res.status + ")";
        return;
      }
      (await res.json()).items.forEach(function (item) {
        const session = item.session_id || "";
        if (!sessions.length || sessions[sessions.length - 1].id !== session) addSession(session, "Conversation");
        const el = bubble(item.role === "user" ? "user" : "bot history final", item.run_id, session);
        fill(el, item.text, item.markup);
        setEnding(el, item.ending);
        list.appendChild(el);
      });
    } catch (err) {
      status.textContent = "history unavailable: " + err;
    }
  }

  // -- sending --------------------------------------------------------------------
  async function post(text, id) {
    return fetch(api + "/messages", {
      method: "POST",
      headers: Object.assign({ "content-type": "application/json" }, auth),
      body: JSON.stringify({ id: id, text: text }),
    });
  }

  function refusal(res) {
    if (res.status === 401 || res.status === 403) return "session invalid or expired, open a new chat link";
    return "HTTP " + res.status;
  }

  function markFailed(mine, why, retry) {
    mine.classList.remove("accepted");
    mine.classList.add("failed", "refused");
    const note = document.createElement("span");
    note.className = "send-error";
    note.setAttribute("role", "alert");
    note.textContent = "Not sent: " + why;
    const again = document.createElement("button");
    again.type = "button";
    again.className = "retry";
    again.textContent = "Retry";
    again.addEventListener("click", retry);
    note.appendChild(again);
    mine.appendChild(note);
  }

  // One message, sent until it lands: a retry posts the same id, so ingress keeps it once.
  async function deliver(mine, text, id) {
    mine.classList.remove("failed", "refused");
    mine.querySelectorAll(".send-error").forEach(function (n) { n.remove(); });
    const again = function () { deliver(mine, text, id).then(function () { input.focus(); }); };
    try {
      const res = await post(text, id);
      if (res.ok) {
        mine.classList.add("accepted");
        return;
      }
      markFailed(mine, refusal(res), again);  // on the bubble, not the header: it is this message's
    } catch (err) {
      markFailed(mine, String(err), again);
    }
  }

  composer.addEventListener("submit", function (ev) {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text || input.disabled) return;
    input.value = "";
    grow();
    const mine = bubble("user", null, current);
    fill(mine, text, "plain");
    place(mine, null);
    showConversations();
    deliver(mine, text, newId());
  });

  input.addEventListener("keydown", function (ev) {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      composer.requestSubmit();
    }
  });

  function grow() {
    // As tall as its text (CSS caps it): the content's height plus the borders (box-sizing: border-box).
    input.style.height = "auto";
    input.style.height = (input.scrollHeight + input.offsetHeight - input.clientHeight) + "px";
  }
  input.addEventListener("input", grow);

  stop.addEventListener("click", async function () {
    // The same command a user can type: ingress turns `/stop` into an interrupt of the current run.
    stop.disabled = true;
    try {
      const res = await post("/stop", newId());
      if (!res.ok) status.textContent = "stop not sent (" + refusal(res) + ")";
    } catch (err) {
      status.textContent = "stop not sent: " + err;
    } finally {
      stop.disabled = false;
    }
  });

  $("new-chat").addEventListener("click", async function () {
    // `/new` is ingress's command: a new history session of this chat (the model starts afresh).
    const id = newId();
    try {
      const res = await post("/new", id);
      if (!res.ok) {
        status.textContent = "new chat not started (" + refusal(res) + ")";
        return;
      }
    } catch (err) {
      status.textContent = "new chat not started: " + err;
      return;
    }
    addSession("new:" + id, "New chat");
    view(current);
    input.focus();
  });

  $("menu").addEventListener("click", function () {
    const open = sidebar.classList.toggle("open");
    $("menu").setAttribute("aria-expanded", open ? "true" : "false");
  });

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

  loadHistory().then(function () {
    if (!sessions.length) addSession("", "New chat");
    view(current);
    input.focus();
    connect();
  });
})();
