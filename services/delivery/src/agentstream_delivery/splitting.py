"""Length splitting, measured the way each platform counts (pure functions).

A message longer than the platform allows is cut before
`safe = max(500, limit - len(cursor) - 100)` so an intermediate frame with its cursor
always fits. The cut prefers a paragraph, then a line, then a space (each in the
second half of the window, so no message ends up tiny), and is never placed inside an
inline code span, nor inside a character the reader sees as one (a flag, a skin tone,
an emoji joined by ZWJ, a letter with its combining accent). A fenced code block cut in two is closed at the end of the first
message and reopened, with its language, at the start of the next one; `unsplit`
undoes exactly that, so the joined platform messages equal the original text.

The separator (blank line, newline, space) stays at the end of the head: nothing is
dropped, so concatenating the pieces gives the text back.

The text is the model's Markdown; the measure may be that of its rendering
(`Capabilities.length`), which is not a sum over characters: the longest prefix that
fits is then found by bisection, and a head whose rendering is still too long (markup
that only closes past the cut renders differently) is cut again, shorter.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agentstream_delivery.render import CURSOR

Measure = Callable[[str], int]
MeasureName = Literal["chars", "utf16"]
FENCE = "```"
FENCE_CLOSE_ROOM = len("\n" + FENCE)
MIN_SAFE = 500
# Spaces and tabs only: `\s` would run over the line's end and read the code's first word as the language.
# A fence's line, searched in "\n" + text (a literal first is found faster than `^` in MULTILINE).
_FENCE_LINE = re.compile(r"\n[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]*)")


def utf16_len(text: str) -> int:
    """UTF-16 code units (how Telegram counts): characters beyond the BMP count twice.

    Counted by the codec (a lone surrogate passes as the one unit it is), not a loop over characters."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


MEASURES: dict[MeasureName, Measure] = {"chars": len, "utf16": utf16_len}


def fits(text: str, room: int, measure: Measure) -> bool:
    """`measure(text) <= room`, settled by the measure's own cheap bounds when it has them (`RenderedMeasure.fits`)."""
    fits_in: Callable[[str, int], bool] | None = getattr(measure, "fits", None)
    return fits_in(text, room) if fits_in is not None else measure(text) <= room


def safe_limit(limit: int, cursor: str = CURSOR) -> int:
    return max(MIN_SAFE, limit - len(cursor) - 100)


@dataclass(frozen=True)
class Cut:
    head: str  # the first message, fences balanced
    consumed: int  # characters of the input the head covers (the closer added is not counted)
    carry: str  # what the next message starts with: the reopened fence, or ""


def open_fence(text: str) -> str | None:
    """The language ("" if none) of a code fence left open at the end of `text`, else None."""
    lang: str | None = None
    for m in _FENCE_LINE.finditer("\n" + text):
        lang = m.group(2) if lang is None else None
    return lang


def _in_inline_code(text: str, pos: int) -> bool:
    """True when `pos` sits inside a `code span` of its line (fenced blocks are not spans)."""
    line_start = text.rfind("\n", 0, pos) + 1
    line = text[line_start:pos]
    if open_fence(text[:line_start]) is not None:
        return False
    return line.count("`") % 2 == 1


def _fit_range(text: str, room: int, measure: Measure) -> tuple[int, int]:
    """Where the longest prefix whose measure is at most `room` ends: exactly for a measure by characters, else a
    range to bisect."""
    if measure is len:
        return (fit := min(len(text), room)), fit
    if measure is utf16_len:
        total = 0
        for i, ch in enumerate(text):
            total += measure(ch)
            if total > room:
                return i, i
        return len(text), len(text)
    # A rendered measure knows where the answer lies from the blocks a growing text keeps (`RenderedMeasure.span`).
    span: Callable[[str, int], tuple[int, int]] | None = getattr(measure, "span", None)
    return span(text, room) if span is not None else (0, len(text))


def _extends(ch: str) -> bool:
    """A character that belongs to the one before it: a combining mark, a variation selector, a skin tone, ZWJ, a tag."""
    cp = ord(ch)
    return (
        unicodedata.category(ch) in ("Mn", "Me", "Mc")
        or cp == 0x200D
        or 0xFE00 <= cp <= 0xFE0F
        or 0x1F3FB <= cp <= 0x1F3FF
        or 0xE0020 <= cp <= 0xE007F
    )


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def whole_character_start(text: str, pos: int) -> int:
    """`pos`, or the start of the character as the reader sees it (a grapheme cluster) that `pos` falls inside.

    Never below 1 while `pos` is: a cut that cannot keep a cluster whole takes its first part.
    """
    at = pos
    while 0 < at < len(text):
        if _extends(text[at]) or text[at - 1] == "\u200d":
            at -= 1
        elif _regional(text[at]) and _regional(text[at - 1]):
            run = at
            while run > 0 and _regional(text[run - 1]):
                run -= 1
            if (at - run) % 2 == 0:  # `at` starts a pair
                break
            at -= 1
        else:
            break
    return at if at > 0 or pos == 0 else pos


def _separator_cut(text: str, hard: int, in_fence: Callable[[int], bool]) -> tuple[int, str] | None:
    """The cut at a separator for a hard limit `hard`: where, and after which separator; None if there is none."""
    floor = hard // 2
    for sep in ("\n\n", "\n", " "):
        pos = text.rfind(sep, floor, hard)
        while pos != -1:
            at = pos + len(sep)
            # Inside a code block only whole lines may be cut; elsewhere never inside a code span.
            if not _in_inline_code(text, at) and (sep != " " or not in_fence(at)):
                return at, sep
            pos = text.rfind(sep, floor, pos)
    return None


def _cut_point(text: str, hard: int, in_fence: Callable[[int], bool]) -> int:
    found = _separator_cut(text, hard, in_fence)
    return found[0] if found is not None else whole_character_start(text, hard)


def _settled_cut_point(text: str, lo: int, hi: int, in_fence: Callable[[int], bool]) -> int | None:
    """`_cut_point(text, hard)` for every `hard` in `[lo, hi]` when it is one and the same, else None.

    It is when a blank line ends at or before `lo` and in the second half of `hi` is a cut point at `lo`, and no
    other blank line ends in `(it, hi]`: the paragraph separator is tried first, from the end of the window, and
    the one found is then the last in every window up to `hi`, and inside every one down to `lo`. (A split's search
    then needs no bisection between the closed prefixes around the answer: each probe is a parse of the block
    being cut.)"""
    if lo < 2:  # a hard limit of 1 is cut there, whatever the separators
        return None
    found = _separator_cut(text, lo, in_fence)
    if found is None or found[1] != "\n\n":
        return None
    at = found[0]
    if at - 2 < hi // 2 or text.find("\n\n", at - 1, hi) != -1:
        return None
    return at


def cut(text: str, safe: int, measure: Measure) -> Cut | None:
    """Where the first message ends, or None when `text` fits in one message."""
    if fits(text, safe, measure):
        return None
    room = safe - FENCE_CLOSE_ROOM

    def in_fence(pos: int) -> bool:
        return open_fence(text[:pos]) is not None

    while True:
        hard, at = _hard_limit_and_cut_point(text, room, measure, in_fence)
        c = _cut_at(text, at)
        if hard == 1 or fits(c.head, safe, measure):
            return c
        room = room * 9 // 10


def _hard_limit_and_cut_point(
    text: str, room: int, measure: Measure, in_fence: Callable[[int], bool]
) -> tuple[int, int]:
    """The hard limit (the longest prefix that fits `room`, at least 1) and the cut point it gives.

    The limit is bisected for in the range `_fit_range` gives, and the search stops as soon as the range left
    gives the cut point whichever limit in it is the answer (`_settled_cut_point`): the same cut as the whole
    bisection's, whose every probe of a rendered measure parses the block being cut. The limit returned is then
    the range's end (never 1)."""
    lo, hi = _fit_range(text, room, measure)
    while lo < hi:
        settled = _settled_cut_point(text, lo, hi, in_fence)
        if settled is not None:
            return hi, settled
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    hard = max(1, lo)
    return hard, _cut_point(text, hard, in_fence)


def _cut_at(text: str, at: int) -> Cut:
    head = text[:at]
    lang = open_fence(head)
    if lang is None:
        return Cut(head, at, "")
    closer = FENCE if head.endswith("\n") else "\n" + FENCE
    return Cut(head + closer, at, f"{FENCE}{lang}\n")


def split_text(text: str, limit: int, measure: Measure = len, cursor: str = CURSOR) -> list[str]:
    """The whole text as platform messages (used for final-only platforms and in tests)."""
    safe = safe_limit(limit, cursor)
    pieces: list[str] = []
    carry = ""
    body = text
    while (c := cut(carry + body, safe, measure)) is not None:
        pieces.append(c.head)
        body = (carry + body)[c.consumed :]
        carry = c.carry
    if body or not pieces:
        pieces.append(carry + body)
    return pieces


def unsplit(pieces: list[str]) -> str:
    """Join platform messages back into the text: removes the fence closers/openers a cut added."""
    out = ""
    reopen = ""
    for i, piece in enumerate(pieces):
        if reopen and piece.startswith(reopen):
            piece = piece[len(reopen) :]
        reopen = ""
        if i < len(pieces) - 1 and piece.endswith(FENCE):
            body = piece[: -len(FENCE)]
            lang = open_fence(out + body)
            if lang is not None and pieces[i + 1].startswith(f"{FENCE}{lang}\n"):
                piece, reopen = body, f"{FENCE}{lang}\n"
        out += piece
    return out
