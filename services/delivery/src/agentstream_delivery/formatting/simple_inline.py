"""An inline run's tokens from one scan, for the runs most answers are made of, without markdown-it's inline rules.

markdown-it-py tries its inline rules at every character one may start at, each a Python call, then pairs the
emphasis markers in two more passes: about 1 µs a character, the largest single part of what rendering a
stream costs (docs/delivery.md, "Formatting cost"). A run whose constructs are all of the simple kinds below
gets the same tokens here from one scan:

- code spans (a run of backticks closed by the next run of as many);
- links `[label](target)`: a label with no markup in it, a target with no space, parenthesis or escape, no title;
- `*`, `_`, `**`, `__` and `~~` marker runs that each can only open or only close (CommonMark's flanking rules,
  `StateInline.scanDelims`), where a closer pairs with the opener opened last (nested, never crossed) or finds
  none open (then, like an opener never closed, it is text).

Any other run returns None and markdown-it parses it: one with a line break, an escape, an entity, a `<`
(autolinks), an image, a run of three markers or more, a marker run that could both open and close (`a*b*c`),
a closer that is not the last opener's (`*a **b* c**`), a link whose label holds markup, a link markdown-it
would not accept. Within those limits each step is markdown-it's own (the rule files named below), and
tests/unit/delivery/formatting/test_parse_paths.py compares the tokens with markdown-it's on generated text.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
from markdown_it.parser_inline import ParserInline
from markdown_it.ruler import Ruler
from markdown_it.token import Token

# What only markdown-it's own rules handle: a line break (`newline`), an escape, an entity, `<` (`autolink`,
# `html_inline`), an image.
_DECLINED = re.compile(r"[\n\\&<]|!\[")
# Where a rule of the simple kinds starts: a backtick run, a marker run, a link's `[`.
_ACTIVE = re.compile(r"`+|\*+|_+|~+|\[")
# A link's target and its `)`, as `parseLinkDestination` reads one with no `<`, space, control character,
# parenthesis or escape (`&` and `\n` are declined for the whole run), followed at once by the `)` (no title).
_TARGET = re.compile(r"\(([^\x00-\x20\x7f()\\]+)\)")
_LABEL_MARKUP = re.compile(r"[`*_~\[]")  # a label holding any of these is parsed by markdown-it
# The inline rules (and post-passes) this scan stands for: markdown-it's commonmark preset with strikethrough.
_RULES = ["text", "newline", "escape", "backticks", "strikethrough", "emphasis", "link", "image", "autolink"]
_RULES2 = ["balance_pairs", "strikethrough", "emphasis", "fragments_join"]
_HTML_RULES = (["html_inline", "entity"], ["entity"])  # raw HTML on or off: `<` is declined either way
# (`linkify` too, on or off, where its option is off: the rule then reads nothing)


class _Marker:
    """A marker run, and what pairing made of it."""

    __slots__ = ("char", "closes", "length", "opens", "paired")

    def __init__(self, char: str, length: int, opens: bool, closes: bool) -> None:
        self.char = char
        self.length = length
        self.opens = opens
        self.closes = closes
        self.paired = False


class _Link(NamedTuple):
    href: str
    label: str


_TAGS = {("*", 1): "em", ("_", 1): "em", ("*", 2): "strong", ("_", 2): "strong", ("~", 2): "s"}


def simple_run_tokens(md: MarkdownIt, src: str) -> list[Token] | None:
    """`src`'s inline tokens as markdown-it's inline parse leaves them, or None where the run is not simple."""
    if _DECLINED.search(src) is not None or not _stands_for(md.inline, md):
        return None
    items: list[str | _Marker | _Link | Token] = []  # in order: literal text, marker runs, links, code spans
    openers: list[_Marker] = []
    pos = 0
    for found in _ACTIVE.finditer(src):
        start, end = found.span()
        if start < pos:  # inside a code span or link already taken
            continue
        if start > pos:
            items.append(src[pos:start])
        char = src[start]
        if char == "`":  # rules_inline/backticks.py
            close = _closing_backticks(src, end, end - start)
            if close == -1:
                items.append(src[start:end])  # no closer: the backticks are text
                pos = end
                continue
            content = src[end:close]
            if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
                content = content[1:-1]
            items.append(Token("code_inline", "code", 0, content=content, markup=src[start:end]))
            pos = close + end - start
            continue
        if char == "[":  # rules_inline/link.py, with no reference definitions (`env` holds none)
            link = _link(md, src, start)
            if link is None:
                return None
            if isinstance(link, int):  # not a link: the `[` is text
                items.append("[")
                pos = start + 1
                continue
            items.append(link[0])
            pos = link[1]
            continue
        marker = _marker(src, start, end)
        if marker is None:
            return None
        if isinstance(marker, str):
            items.append(marker)  # a marker run that neither opens nor closes: text
        elif marker.opens:
            openers.append(marker)
            items.append(marker)
        elif not openers:
            items.append(marker.char * marker.length)  # a closer with nothing open: text
        elif (top := openers[-1]).char != marker.char or top.length != marker.length:
            return None  # markdown-it would look further back, or pair part of a run
        else:
            openers.pop()
            top.paired = marker.paired = True
            items.append(marker)
        pos = end
    if pos < len(src):
        items.append(src[pos:])
    return _tokens(items)


def _closing_backticks(src: str, after: int, length: int) -> int:
    """Where the first run of exactly `length` backticks after `after` starts, or -1."""
    at = src.find("`", after)
    while at != -1:
        end = at + 1
        while end < len(src) and src[end] == "`":
            end += 1
        if end - at == length:
            return at
        at = src.find("`", end)
    return -1


def _link(md: MarkdownIt, src: str, start: int) -> tuple[_Link, int] | int | None:
    """The link at `start` and where it ends; `start` when markdown-it reads no link there; None when it is not
    one of the simple kinds (markdown-it decides)."""
    close = src.find("]", start + 1)
    if close == -1:
        return start  # `parseLinkLabel` finds no end: not a link
    label = src[start + 1 : close]
    if _LABEL_MARKUP.search(label) is not None:
        return None
    if not src.startswith("(", close + 1) or src.find(")", close + 2) == -1:
        return start  # `[label]` alone is a reference, and there are none; an inline link ends in a `)`
    target = _TARGET.match(src, close + 1)
    if target is None:
        return None
    href = md.normalizeLink(target.group(1))
    if not md.validateLink(href):
        return None
    return _Link(href, label), target.end()


def _marker(src: str, start: int, end: int) -> _Marker | str | None:
    """The marker run `src[start:end]` as `scanDelims` reads it (rules_inline/emphasis.py, strikethrough.py):
    a run that may pair, literal text, or None where pairing it is not of the simple kinds."""
    char, length = src[start], end - start
    if char == "~" and length == 1:
        return src[start:end]  # strikethrough needs two
    if length > 2:
        return None
    last_space, last_punct = _kind(src[start - 1] if start > 0 else " ")
    after_space, after_punct = _kind(src[end] if end < len(src) else " ")
    left = not (after_space or (after_punct and not (last_space or last_punct)))
    right = not (last_space or (last_punct and not (after_space or after_punct)))
    within_words = char != "_"
    opens = left and (within_words or not right or last_punct)
    closes = right and (within_words or not left or after_punct)
    if opens and closes:
        return None
    if not opens and not closes:
        return src[start:end]
    return _Marker(char, length, opens, closes)


def _kind_of(char: str) -> tuple[bool, bool]:
    """(whitespace, punctuation) as `scanDelims` tells them."""
    return isWhiteSpace(ord(char)), isMdAsciiPunct(ord(char)) or isPunctChar(char)


_ASCII_KINDS = {chr(code): _kind_of(chr(code)) for code in range(128)}


def _kind(char: str) -> tuple[bool, bool]:
    kind = _ASCII_KINDS.get(char)
    return kind if kind is not None else _kind_of(char)


def _tokens(items: list[str | _Marker | _Link | Token]) -> list[Token]:
    """The tokens markdown-it's passes leave (`balance_pairs`, the markers' `postProcess`, `fragments_join`): paired
    markers become tags, and consecutive text is one token, at the nesting level it sits in. `**`'s outer marker is
    left as an empty text token, which stays one where no other text joins it."""
    tokens: list[Token] = []
    text = ""
    has_text = False  # the text since the last tag is at least one token (an empty marker is one)
    level = 0
    for item in items:
        if isinstance(item, str):
            text += item
            continue
        if isinstance(item, _Marker) and not item.paired:
            text += item.char * item.length
            continue
        if isinstance(item, _Marker) and item.opens and item.length == 2 and item.char != "~":
            has_text = True  # `**`: its outer marker
        if text or has_text:
            tokens.append(Token("text", "", 0, {}, None, level, None, text))
            text, has_text = "", False
        if isinstance(item, Token):
            item.level = level
            tokens.append(item)
        elif isinstance(item, _Link):
            tokens.append(Token("link_open", "a", 1, {"href": item.href}, None, level))
            if item.label:
                tokens.append(Token("text", "", 0, {}, None, level + 1, None, item.label))
            tokens.append(Token("link_close", "a", -1, {}, None, level))
        else:
            tag = _TAGS[item.char, item.length]
            markup = item.char * item.length
            if item.opens:
                tokens.append(Token(tag + "_open", tag, 1, {}, None, level, None, "", markup))
                level += 1
            else:
                level -= 1
                tokens.append(Token(tag + "_close", tag, -1, {}, None, level, None, "", markup))
                has_text = tag == "strong"  # `**`: its outer marker
    if text or has_text:
        tokens.append(Token("text", "", 0, {}, None, level, None, text))
    return tokens


_DEFAULT = ParserInline()  # markdown-it's own inline rules, to tell a parser's rules are them
_STANDS_FOR: dict[ParserInline, bool] = {}


def _stands_for(inline: ParserInline, md: MarkdownIt) -> bool:
    """Whether `md`'s inline rules are markdown-it's own ones this scan follows (checked once per parser)."""
    known = _STANDS_FOR.get(inline)
    if known is None:
        known = _STANDS_FOR[inline] = (
            _enabled(inline.ruler, _DEFAULT.ruler) in [_RULES + extra for extra in _HTML_RULES]
            and _enabled(inline.ruler2, _DEFAULT.ruler2) == _RULES2
            and inline.terminator_re.pattern == _DEFAULT.terminator_re.pattern
            and not md.options.get("linkify")
            and not md.options.get("strikethrough_single_tilde", False)
            and md.options.get("maxNesting", 0) > 2
        )
    return known


def _enabled(ruler: Ruler[Any], default: Ruler[Any]) -> list[str] | None:
    """The names of `ruler`'s enabled rules, None where one is not markdown-it's function of that name."""
    functions = {rule.name: rule.fn for rule in default.__rules__}
    enabled = [rule for rule in ruler.__rules__ if rule.enabled and rule.name != "linkify"]
    if any(functions.get(rule.name) is not rule.fn for rule in enabled):
        return None
    return [rule.name for rule in enabled]
