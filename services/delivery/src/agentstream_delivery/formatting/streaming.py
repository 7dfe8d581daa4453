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

from agentstream_delivery.render import CURSOR
from agentstream_delivery.splitting import open_fence

PAIRED = ("**", "~~")


def close_dangling(frame: str) -> str:
    body, cursor = (frame[: -len(CURSOR)], CURSOR) if frame.endswith(CURSOR) else (frame, "")
    text = body.rstrip()
    if not text:
        return frame
    if open_fence(text) is not None:
        if cursor and open_fence(text[: text.rfind("\n") + 1]) is None:
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
