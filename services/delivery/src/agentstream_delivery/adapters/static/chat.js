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

  function userId() {
    let id = localStorage.getItem("agentstream.user");
    if (!id) {
      id = "web-" + Math.random().toString(36).slice(2, 10);
      localStorage.setItem("agentstream.user", id);
    }
    return id;
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
    el.textContent = frame.text;
    el.classList.toggle("streaming", !frame.final);
    el.classList.toggle("final", frame.final);
    list.scrollTop = list.scrollHeight;
  }

  const events = new EventSource(api + "/events");
  events.onopen = function () { status.textContent = "connected"; };
  events.onerror = function () { status.textContent = "reconnecting…"; };
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
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ id: newId(), text: text, user_id: userId() }),
      });
      mine.classList.add(res.ok ? "accepted" : "refused");
      if (!res.ok) status.textContent = "not sent (" + res.status + ")";
    } catch (err) {
      mine.classList.add("refused");
      status.textContent = "not sent: " + err;
    }
  });
})();
