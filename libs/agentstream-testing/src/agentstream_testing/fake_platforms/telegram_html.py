"""What the Telegram Bot API accepts as `parse_mode: HTML`, checked like the real parser does.

Allowed tags: b/strong, i/em, u/ins, s/strike/del, span class="tg-spoiler", tg-spoiler,
a href, code, pre (with an optional `<code class="language-…">` inside), blockquote
(optionally `expandable`), tg-emoji. Tags must be balanced and properly nested, code and
pre hold no other tag (but pre's one code), a link holds no link, a blockquote no
blockquote. `&lt; &gt; &amp; &quot;` and numeric references are the only entities; a
bare `<` or `&` is refused. The message's length is that of its text once the HTML is
parsed away, in UTF-16 code units.
"""

from __future__ import annotations

import html
import re

TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre"}
    | {"blockquote", "tg-emoji"}
)
NAMED_ENTITIES = frozenset({"lt", "gt", "amp", "quot"})
_TOKEN = re.compile(r"<(/?)([A-Za-z][\w-]*)((?:\s+[\w-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>\"']+))?)*)\s*(/?)>")
_ATTR = re.compile(r"([\w-]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>\"']+)))?")
_ENTITY = re.compile(r"&(#[0-9]+|#x[0-9A-Fa-f]+|[A-Za-z][A-Za-z0-9]*);")


class HtmlRejected(ValueError):
    """The description the Bot API answers after "Bad Request: can't parse entities: "."""


def parse(text: str, tags: frozenset[str] = TAGS) -> str:
    """The message's text once its HTML is parsed; raises `HtmlRejected` as the Bot API refuses it."""
    out: list[str] = []
    stack: list[str] = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch == "<":
            m = _TOKEN.match(text, pos)
            if m is None:
                raise HtmlRejected(f"Unexpected character at byte offset {_offset(text, pos)}")
            _tag(m, stack, text, pos, tags)
            pos = m.end()
        elif ch == "&":
            e = _ENTITY.match(text, pos)
            if e is None or (not e.group(1).startswith("#") and e.group(1) not in NAMED_ENTITIES):
                raise HtmlRejected(f"Unsupported HTML entity at byte offset {_offset(text, pos)}")
            out.append(html.unescape(e.group(0)))
            pos = e.end()
        else:
            out.append(ch)
            pos += 1
    if stack:
        raise HtmlRejected(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def _tag(m: re.Match[str], stack: list[str], text: str, pos: int, tags: frozenset[str]) -> None:
    closing, name, attrs = m.group(1) == "/", m.group(2).lower(), m.group(3)
    if name not in tags:
        raise HtmlRejected(f'Unsupported start tag "{name}" at byte offset {_offset(text, pos)}')
    if closing:
        if not stack or stack[-1] != name:
            raise HtmlRejected(
                f'Unmatched end tag at byte offset {_offset(text, pos)}, expected "</{stack[-1] if stack else ""}>", found "</{name}>"'
            )
        stack.pop()
        return
    if stack and stack[-1] in ("code", "pre") and not (stack[-1] == "pre" and name == "code"):
        raise HtmlRejected(f'Can\'t nest "{name}" inside "{stack[-1]}" at byte offset {_offset(text, pos)}')
    if name in ("a", "blockquote") and name in stack:
        raise HtmlRejected(f'Nested "{name}" entities are not allowed at byte offset {_offset(text, pos)}')
    values = {a.group(1).lower(): next((v for v in a.groups()[1:] if v is not None), "") for a in _ATTR.finditer(attrs)}
    if name == "a" and not values.get("href"):
        raise HtmlRejected(f"Empty URL in a link at byte offset {_offset(text, pos)}")
    if name == "span" and values.get("class") != "tg-spoiler":
        raise HtmlRejected(f'Tag "span" must have class "tg-spoiler" at byte offset {_offset(text, pos)}')
    stack.append(name)


def _offset(text: str, pos: int) -> int:
    return len(text[:pos].encode())
