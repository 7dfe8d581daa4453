// The agentstream web chat: posts what the user types, renders the answer as delivery streams it.
// Each SSE frame carries a message's whole text, so a frame replaces the bubble's text.
(function () {
  "use strict";
  const parts = location.pathname.split("/").filter(Boolean);
  const chatId = decodeURIComponent(parts[parts.length - 1]);
  const root = location.pathname.replace(/\/web\/[^/]+\/?$/, "");
  const api = root + "/v1/web/" + encodeURIComponent(chatId);
  const list = document.getElementById("messages");
  const status = document.getElementById("status");
  const input = document.getElementById("text");
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

  function newId() {
    return (window.crypto && crypto.randomUUID) ? crypto.randomUUID()
      : Date.now().toString(36) + Math.random().toString(36).slice(2);
  }

  function bubble(kind, text) {
    const el = document.createElement("div");
    el.className = "msg " + kind;
    el.textContent = text;
    list.appendChild(el);
    list.scrollTop = list.scrollHeight;
    return el;
  }

  function render(frame) {
    let el = list.querySelector('[data-message-id="' + CSS.escape(frame.message_id) + '"]');
    if (!el) {
      el = bubble("bot", "");
      el.dataset.messageId = frame.message_id;
    }
    // "html" frames are delivery's renderer output: every text the model wrote is escaped in them.
    if (frame.markup === "html") {
      el.innerHTML = frame.text;
    } else {
      el.textContent = frame.text;
    }
    el.classList.toggle("streaming", !frame.final);
    el.classList.toggle("final", frame.final);
    list.scrollTop = list.scrollHeight;
  }

  const events = new EventSource(api + "/events?token=" + encodeURIComponent(token));
  events.onopen = function () { status.textContent = "connected"; };
  events.onerror = function () {
    // A refused stream (401/403) is not retried by the browser: the session is over.
    status.textContent = events.readyState === EventSource.CLOSED
      ? "session invalid or expired: open a new chat link" : "reconnecting…";
  };
  events.onmessage = function (ev) { render(JSON.parse(ev.data)); };

  document.getElementById("composer").addEventListener("submit", async function (ev) {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    const mine = bubble("user", text);
    try {
      const res = await fetch(api + "/messages", {
        method: "POST",
        headers: { "content-type": "application/json", "authorization": "Bearer " + token },
        body: JSON.stringify({ id: newId(), text: text }),
      });
      mine.classList.add(res.ok ? "accepted" : "refused");
      if (res.status === 401 || res.status === 403) {
        status.textContent = "not sent: session invalid or expired, open a new chat link";
      } else if (!res.ok) {
        status.textContent = "not sent (" + res.status + ")";
      }
    } catch (err) {
      mine.classList.add("refused");
      status.textContent = "not sent: " + err;
    }
  });
})();
