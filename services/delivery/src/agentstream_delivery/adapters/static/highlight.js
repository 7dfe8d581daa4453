// A small code highlighter for the chat page (no network, no dependencies): marks comments,
// strings, numbers and common keywords in <pre><code> blocks with CSS classes (hl-*).
// It only ever reads textContent and writes text nodes inside spans: it adds no markup of the model's.
(function () {
  "use strict";
  const KEYWORDS = new Set((
    "and as async await break case catch class const continue def default del do elif else enum " +
    "export extends false fn for from func function go if impl import in interface is lambda let " +
    "loop match mod module mut new nil none not null or package pass pub raise return self static " +
    "struct super switch this throw true try type typeof use var void while with yield None True False"
  ).split(" "));
  const TOKEN = /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b\d[\d_.]*(?:e[+-]?\d+)?\b)|([A-Za-z_][\w]*)/g;

  function span(cls, text) {
    const el = document.createElement("span");
    el.className = cls;
    el.textContent = text;
    return el;
  }

  function highlight(code) {
    if (code.dataset.highlighted === code.textContent) return;
    const source = code.textContent;
    const out = document.createDocumentFragment();
    let last = 0;
    for (const m of source.matchAll(TOKEN)) {
      if (m[4] && !KEYWORDS.has(m[4])) continue;
      if (m.index > last) out.appendChild(document.createTextNode(source.slice(last, m.index)));
      const cls = m[1] ? "hl-comment" : m[2] ? "hl-string" : m[3] ? "hl-number" : "hl-keyword";
      out.appendChild(span(cls, m[0]));
      last = m.index + m[0].length;
    }
    out.appendChild(document.createTextNode(source.slice(last)));
    code.replaceChildren(out);
    code.dataset.highlighted = source;
  }

  window.agentstreamHighlight = function (root) {
    root.querySelectorAll("pre code").forEach(highlight);
  };
})();
