"""Reasoning blocks are not for the reader: `<think>`-style blocks are hidden (pure).

A block is hidden when its opening tag stands at a block boundary (start of the text
or of a line); the same tag mid-sentence is prose ("use the <think> tag") and shown. An
unclosed block hides everything after it. While streaming, a partial opening tag at a
block boundary at the very end ("\\n<thi") is held back until the next delta decides.
The function works on the whole raw text of a message, so deltas can split tags
anywhere; the visible text only grows as raw text grows.
"""

from __future__ import annotations

import re

THINK_TAGS = ("think", "thinking", "reasoning", "thought", "reasoning_scratchpad", "reflection", "scratchpad")
_OPEN = re.compile(r"<(" + "|".join(THINK_TAGS) + r")>", re.IGNORECASE)
_OPENERS = tuple(f"<{t}>" for t in THINK_TAGS)


def _at_block_boundary(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    return text[line_start:pos].strip() == ""


def _partial_opener_at_end(text: str) -> int | None:
    lt = text.rfind("<")
    if lt == -1 or not _at_block_boundary(text, lt):
        return None
    tail = text[lt:].lower()
    return lt if any(o.startswith(tail) for o in _OPENERS) else None


def visible_text(raw: str, *, final: bool) -> str:
    out: list[str] = []
    i = 0
    while (m := _OPEN.search(raw, i)) is not None:
        if not _at_block_boundary(raw, m.start()):
            out.append(raw[i : m.end()])
            i = m.end()
            continue
        out.append(raw[i : m.start()])
        close = re.compile(f"</{m.group(1)}>", re.IGNORECASE).search(raw, m.end())
        if close is None:
            return "".join(out)  # unclosed: everything after the tag is reasoning
        i = close.end()
        while i < len(raw) and raw[i] in " \t\r\n":
            i += 1
    tail = raw[i:]
    if not final:
        held = _partial_opener_at_end(tail) if tail else None
        if held is not None:
            tail = tail[:held]
    out.append(tail)
    return "".join(out)
