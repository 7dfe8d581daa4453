"""A preview frame's dangling inline markup, closed so the words show formatted while they stream.

Markdown shows `**bold te` literally until its closing `**` arrives; a preview closes it
for the reader: a code span (an odd backtick), `**` and `~~` left open in the frame's last
block are closed before the cursor, the one opened last first. Only what the frame
already shows content for is closed (`**` with nothing after it yet stays as it is), a
fence is left to the parser (it runs to the end; a cursor on the fence's own line goes below
it, where it shows), and single `*`/`_` are left alone:
they are bullets and intraword characters too often to guess.
"""

from __future__ import annotations

from collections import OrderedDict

from agentstream_delivery.render import CURSOR
from agentstream_delivery.splitting import _FENCE_LINE, open_fence

PAIRED = ("**", "~~")


def close_dangling(frame: str) -> str:
    body, cursor = (frame[: -len(CURSOR)], CURSOR) if frame.endswith(CURSOR) else (frame, "")
    text = body.rstrip()
    if not text:
        return frame
    lines = text[: text.rfind("\n") + 1]
    if FENCES.open_fence(text) is not None:
        if cursor and FENCES.open_fence(lines) is None:
            # The frame's last line opens the fence: on it, the cursor would be the fence's info string and
            # vanish (the preview then renders like the final). Below it, as the code so far; no longer.
            return text + "\n" + CURSOR.strip()
        return frame
    block = text[text.rfind("\n\n") + 1 :]
    if block.count("`") % 2 == 1:  # inside a code span: nothing else can be open in it
        return frame if block.endswith("`") else text + "`" + cursor
    opened: list[tuple[int, str]] = []
    for marker in PAIRED:
        at = block.rfind(marker)
        if block.count(marker) % 2 == 1 and _has_content_after(block, at + len(marker)):
            opened.append((at, marker))
    if not opened:
        return frame
    return text + "".join(marker for _, marker in sorted(opened, reverse=True)) + cursor


def _has_content_after(block: str, pos: int) -> bool:
    rest = block[pos:]
    return bool(rest) and not rest[0].isspace() and rest.strip("*~_") != ""


class FenceMemo:
    """`open_fence` of growing texts, carried on from the state after each one's complete lines (by its first
    `head` characters): a frame is checked for an open fence at every edit, and the frames of one answer share
    all but their last lines. Each fence line (every match is within one line) opens a fence or closes the
    open one, so the state after some lines and the lines after them give the state after both. Which texts
    are remembered never changes a result, only its cost."""

    def __init__(self, max_texts: int = 512, head: int = 64) -> None:
        self.max_texts = max_texts
        self.head = head
        self._states: OrderedDict[str, tuple[str, str | None]] = OrderedDict()  # (complete lines, state after them)

    def clear(self) -> None:
        self._states.clear()

    def open_fence(self, text: str) -> str | None:
        end = text.rfind("\n") + 1  # complete lines: up to and with the last newline
        if end <= self.head:
            return open_fence(text)
        key = text[: self.head]
        known = self._states.get(key)
        done, state = known if known is not None and text.startswith(known[0]) else ("", None)
        if len(done) < end:
            state = _after(state, text[len(done) : end])
            done = text[:end]
            self._states[key] = (done, state)
            self._states.move_to_end(key)
            while len(self._states) > self.max_texts:
                self._states.popitem(last=False)
        return _after(state, text[len(done) :])


def _after(state: str | None, lines: str) -> str | None:
    """`open_fence` of a text that ends in `state` (at a line's start) followed by `lines`."""
    if state is None:
        return open_fence(lines)
    first = _FENCE_LINE.search("\n" + lines)  # closes the open fence; the lines after it start closed
    if first is None:
        return state
    after = lines.find("\n", first.end() - 1)  # the rest of its line holds no other (a match starts a line)
    return None if after == -1 else open_fence(lines[after:])


FENCES = FenceMemo()
