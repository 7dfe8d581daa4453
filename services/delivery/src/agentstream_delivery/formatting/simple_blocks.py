"""A text's block tokens from one pass over its lines, for the shapes most answers are made of.

markdown-it-py's block parser tries its rules in turn on every line, each a Python call with its own logging,
and makes a state of per-line arrays first: after the inline short cuts (`simple_inline.py`) it was the larger
half of what a stream's parses cost (docs/delivery.md, "Formatting cost"). A text made only of

- paragraphs of lines that start with no block syntax (a first line may start with one space: a cursor
  after a blank line),
- ATX headings (`#` to `######`, a space, words, no closing `#`),
- fenced code blocks (closed or running to the end),
- tight bullet lists of one-line items (`- `, `* ` or `+ ` and words; one marker a list),

with no tab, carriage return or NUL anywhere, no two blank lines in a row and no blank line that holds
spaces, gets here the tokens markdown-it makes of it, inline runs included (`tree.inline_tokens`). Anything
else returns None and markdown-it parses the text: a quote, a rule, an ordered list, a nested or loose list,
an item with more than one line, indented code, a line markdown-it would read as one of those. Only the
parser for texts without tables, setext headings and references (`tree.parser_for_plain_blocks`) is stood
for. Each decision below is one markdown-it's rules make (the rule files are named where they are
followed), and tests/unit/delivery/formatting/test_parse_paths.py compares the tokens on generated text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import mdTrim
from markdown_it.token import Token

# What one line starts, to markdown-it's block rules (after at most three spaces of indent, which only the fence's
# closing line may have here): a heading, a fence, a quote, a bullet or ordered list item, a thematic break.
_HEADING = re.compile(r"(#{1,6}) +(.*?) *$")  # with words: `#` alone or `# x #` is markdown-it's
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)$")
_ITEM = re.compile(r"([-+*]) ([^ ].*)$")
_BLOCK_START = re.compile(r" {0,3}(?:#{1,6}(?: |$)|`{3}|~{3}|>|[-+*](?: |$)|[0-9]{1,9}[.)](?: |$))")
_BREAK = re.compile(r" {0,3}(?:(?:\* *){3,}|(?:- *){3,}|(?:_ *){3,})$")
_SPACES_ONLY = re.compile(r"(?:^|\n) +(?:\n|$)")  # a line of spaces: blank to markdown-it, or dropped at the end
_MAY_START_BLOCK = frozenset(" #>-+*_`~0123456789")  # a line starting otherwise starts no block
# The block rules (in order) of the parser stood for, and its core rules.
_BLOCK_RULES = ["code", "fence", "blockquote", "hr", "list", "heading", "paragraph"]
_CORE_RULES = ["normalize", "block", "inline"]


def simple_block_tokens(
    md: MarkdownIt, text: str, inline: Callable[[MarkdownIt, str], list[Token]]
) -> list[Token] | None:
    """`md.parse(text)`'s tokens, each inline token's children from `inline` (markdown-it's `inline` core rule as
    `tree.cached_inline` makes it), or None where the text is not of the simple shapes."""
    if "\t" in text or "\r" in text or "\0" in text or "\n\n\n" in text or not _stands_for(md):
        return None  # tabs (indent widths), what `normalize` rewrites, two blank lines in a row (what they end)
    if (text.startswith(" ") or "\n " in text) and _SPACES_ONLY.search(text) is not None:
        return None
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # a last line break ends the last line; it starts none
    out: list[Token] = []
    at = 0
    # What came before: "" (nothing), "blank", "paragraph", "heading", "fence", "list" or "list+blank" (a list whose
    # last item took the blank line after it in: the same marker again would make the list loose)
    previous = ""
    while at < len(lines):
        line = lines[at]
        if line == "":
            at += 1
            if previous == "list":
                previous = "list+blank"
            elif previous != "list+blank":
                previous = "blank"
            continue
        first = line[0]
        fence = _FENCE.match(line) if first in "`~" else None
        if fence is not None:
            if fence.group(1)[0] == "`" and "`" in fence.group(2):
                return None  # not a fence: a code span markdown-it reads
            at = _fence(lines, at, fence, text, out)
            previous = "fence"
            continue
        heading = _HEADING.match(line) if first == "#" else None
        if heading is not None:
            if heading.group(2).endswith("#") or heading.group(2) == "":
                return None
            _heading(md, inline, at, heading, out)
            at += 1
            previous = "heading"
            continue
        item = _item(line) if first in "-+*" else None
        if item is not None:
            if previous == "list+blank" and out[-1].markup == item.group(1):
                return None  # the same list goes on after a blank line: a loose list
            found = _list(md, inline, lines, at, out)
            if found is None:
                return None
            previous = "list+blank" if lines[found - 1] == "" else "list"  # its last item took a blank line in
            at = found
            continue
        if previous == "list" or not _plain(line.removeprefix(" ")) or line.startswith("  "):
            return None  # a list item's lazy line, a block markdown-it reads, an indent
        at = _paragraph(md, inline, lines, at, out)
        if at < 0:
            return None
        previous = "paragraph"
    return out


def _item(line: str) -> re.Match[str] | None:
    """A bullet item's line; not one of three markers or more and spaces only (`- --`, `* **`): markdown-it's
    thematic break rule is tried before its list rule."""
    item = _ITEM.match(line)
    return item if item is not None and _BREAK.match(line) is None else None


def _plain(line: str) -> bool:
    """Whether `line` starts a paragraph or goes on with one: it starts no block of any kind."""
    if line[:1] not in _MAY_START_BLOCK:
        return True
    return _BLOCK_START.match(line) is None and _BREAK.match(line) is None


def _paragraph(
    md: MarkdownIt, inline: Callable[[MarkdownIt, str], list[Token]], lines: list[str], at: int, out: list[Token]
) -> int:
    """rules_block/paragraph.py: lines up to a blank one or one a heading, fence or bullet item starts (those may
    interrupt a paragraph); -1 where a line would be read otherwise."""
    end = at + 1
    while end < len(lines) and lines[end] != "":
        line = lines[end]
        if line[0] in _MAY_START_BLOCK and (_FENCE.match(line) or _HEADING.match(line) or _ITEM.match(line)):
            break  # (a thematic break that looks like an item interrupts too; it is then declined)
        if line.startswith(" ") or not _plain(line):
            return -1  # an indented line (a heading may be indented), or a block this pass does not read
        end += 1
    content = mdTrim("\n".join(lines[at:end]))
    _leaf(md, inline, "paragraph", "p", [at, end], content, 0, out)
    return end


def _heading(
    md: MarkdownIt, inline: Callable[[MarkdownIt, str], list[Token]], at: int, found: re.Match[str], out: list[Token]
) -> None:
    """rules_block/heading.py."""
    markup = found.group(1)
    tag = f"h{len(markup)}"
    out.append(Token("heading_open", tag, 1, {}, [at, at + 1], 0, None, "", markup, block=True))
    out.append(_inline(md, inline, mdTrim(found.group(2)), [at, at + 1], 1))
    out.append(Token("heading_close", tag, -1, {}, None, 0, None, "", markup, block=True))


def _fence(lines: list[str], at: int, found: re.Match[str], text: str, out: list[Token]) -> int:
    """rules_block/fence.py: to a line of at least as many of the same marker (three spaces of indent at most, then
    only spaces), or to the end."""
    markup = found.group(1)
    closing = re.compile(rf" {{0,3}}{re.escape(markup[0])}{{{len(markup)},}} *$")
    end = at + 1
    while end < len(lines) and closing.match(lines[end]) is None:
        end += 1
    closed = end < len(lines)
    body = lines[at + 1 : end]
    content = "\n".join(body) + ("\n" if body and (closed or text.endswith("\n")) else "")
    token = Token("fence", "code", 0, {}, [at, end + closed], 0, None, content, markup, found.group(2), block=True)
    out.append(token)
    return end + closed


def _list(
    md: MarkdownIt, inline: Callable[[MarkdownIt, str], list[Token]], lines: list[str], at: int, out: list[Token]
) -> int | None:
    """rules_block/list.py, for a tight bullet list of one-line items with one marker: the list ends where the marker
    changes, at a blank line (which its last item takes in), or at the end; None where a line after an item would
    be read as part of it, or an item's words as a block."""
    marker = lines[at][0]
    items: list[tuple[int, str]] = []
    end = at
    while end < len(lines):
        item = _item(lines[end])
        if item is None or item.group(1) != marker:
            break
        if not _plain(item.group(2)):
            return None
        items.append((end, item.group(2)))
        end += 1
    if end < len(lines) and lines[end] != "" and _item(lines[end]) is None:
        return None  # a lazy line of the last item, or a block that interrupts it
    last = end + 1 if end < len(lines) and lines[end] == "" else end
    out.append(Token("bullet_list_open", "ul", 1, {}, [at, last], 0, None, "", marker, block=True))
    for line, words in items:
        item_end = line + 1 if line + 1 < end else last
        out.append(Token("list_item_open", "li", 1, {}, [line, item_end], 1, None, "", marker, block=True))
        _leaf(md, inline, "paragraph", "p", [line, line + 1], mdTrim(words), 2, out, hidden=True)
        out.append(Token("list_item_close", "li", -1, {}, None, 1, None, "", marker, block=True))
    out.append(Token("bullet_list_close", "ul", -1, {}, None, 0, None, "", marker, block=True))
    return last


def _leaf(
    md: MarkdownIt,
    inline: Callable[[MarkdownIt, str], list[Token]],
    kind: str,
    tag: str,
    lines: list[int],
    content: str,
    level: int,
    out: list[Token],
    *,
    hidden: bool = False,
) -> None:
    out.append(Token(f"{kind}_open", tag, 1, {}, lines, level, block=True, hidden=hidden))
    out.append(_inline(md, inline, content, list(lines), level + 1))
    out.append(Token(f"{kind}_close", tag, -1, {}, None, level, block=True, hidden=hidden))


def _inline(
    md: MarkdownIt, inline: Callable[[MarkdownIt, str], list[Token]], content: str, lines: list[int], level: int
) -> Token:
    return Token("inline", "", 0, {}, lines, level, inline(md, content), content, block=True)


_STANDS_FOR: dict[MarkdownIt, bool] = {}


def _stands_for(md: MarkdownIt) -> bool:
    """Whether `md`'s block and core rules are the ones this pass follows (checked once per parser)."""
    known = _STANDS_FOR.get(md)
    if known is None:
        known = _STANDS_FOR[md] = (
            _names(md.block.ruler) == _BLOCK_RULES
            and _names(md.core.ruler) == _CORE_RULES
            and md.options.get("maxNesting", 0) > 4
        )
    return known


def _names(ruler: Any) -> list[str]:
    return [rule.name for rule in ruler.__rules__ if rule.enabled]
