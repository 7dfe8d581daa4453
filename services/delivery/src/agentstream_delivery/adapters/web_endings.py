"""Which ending's words a web message shows, so the page can mark it (docs/delivery.md lists the texts).

The stream machine appends an ending's words to the last message of a run that did not
complete (`render.Ending`); the page styles such a message by its `WebEnding`, read here
from the fixed texts of `render`, never compared with literals elsewhere.
"""

from __future__ import annotations

import html
import re

from agentstream.contracts import FinishReason, WebEnding
from agentstream_delivery.render import (
    ENDING_SEPARATOR,
    ENDING_TEXTS,
    FAILURE_PREFIX,
    RESUMED_MARKER,
    RESUMED_NOTICE,
    STOPPED_MARKER,
)

_FIXED: dict[str, WebEnding] = {
    text: WebEnding.PAUSED if reason is FinishReason.SHUTDOWN else WebEnding.FAILED
    for reason, text in ENDING_TEXTS.items()
}

_TAG = re.compile(r"<[^>]*>")


def ending_of(text: str) -> WebEnding | None:
    """The ending a message's final text shows, if any."""
    if text.endswith(STOPPED_MARKER.strip()):  # stripped: an HTML frame's visible text lost the spacing
        return WebEnding.STOPPED
    if text.endswith(RESUMED_MARKER.strip()) or text == RESUMED_NOTICE:
        return WebEnding.RESUMED
    # Markdown keeps the separator; an HTML frame's visible text has one line break per paragraph.
    for last in (text.rsplit(ENDING_SEPARATOR, 1)[-1], text.rsplit("\n", 1)[-1]):
        if last in _FIXED:
            return _FIXED[last]
        if last.startswith(FAILURE_PREFIX):
            return WebEnding.FAILED
    return None


def visible_text(html_text: str) -> str:
    """What an HTML frame shows as text (its tags dropped, entities read), for `ending_of` and the
    tool line: the renderer's own output, so no tag is ever split by a `>` inside an attribute."""
    return html.unescape(_TAG.sub("", html_text)).strip()
