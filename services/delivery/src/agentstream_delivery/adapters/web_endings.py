"""Which ending's words a web message shows, so the page can mark it (docs/delivery.md lists the texts).

The stream machine appends an ending's words to the last message of a run that did not
complete (`render.Ending`); the page styles such a message by its `WebEnding`, read here
from the fixed texts of `render`, never compared with literals elsewhere.
"""

from __future__ import annotations

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


def ending_of(text: str) -> WebEnding | None:
    """The ending a message's final text shows, if any."""
    if text.endswith(STOPPED_MARKER) or text == STOPPED_MARKER.strip():
        return WebEnding.STOPPED
    if text.endswith(RESUMED_MARKER) or text == RESUMED_NOTICE:
        return WebEnding.RESUMED
    last = text.rsplit(ENDING_SEPARATOR, 1)[-1]
    if last in _FIXED:
        return _FIXED[last]
    if last.startswith(FAILURE_PREFIX):
        return WebEnding.FAILED
    return None
