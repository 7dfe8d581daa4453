"""Which ending's words a web message shows, so the page can mark it (docs/delivery.md lists the texts).

The stream machine appends an ending's words to the last message of a run that did not
complete (`render.Ending`); the page styles such a message by its `WebEnding`, read here
from the fixed texts of `render`, never compared with literals elsewhere.
"""

from __future__ import annotations

import html
import re

from agentstream.contracts import FinishReason, WebEnding
from agentstream_delivery.render import DEFAULT_TEXTS, ENDING_SEPARATOR, FixedTexts

_TAG = re.compile(r"<[^>]*>")


def ending_of(text: str, texts: FixedTexts = DEFAULT_TEXTS) -> WebEnding | None:
    """The ending a message's final text shows, if any, in the web platform's `texts`."""
    if text.endswith(texts.stopped_marker.strip()):  # stripped: an HTML frame's visible text lost the spacing
        return WebEnding.STOPPED
    if text.endswith(texts.resumed_marker.strip()) or text == texts.resumed_notice:
        return WebEnding.RESUMED
    fixed = {t: WebEnding.PAUSED if r is FinishReason.SHUTDOWN else WebEnding.FAILED for r, t in texts.endings.items()}
    # Markdown keeps the separator; an HTML frame's visible text has one line break per paragraph.
    for last in (text.rsplit(ENDING_SEPARATOR, 1)[-1], text.rsplit("\n", 1)[-1]):
        if last in fixed:
            return fixed[last]
        if last.startswith(texts.failure_prefix):
            return WebEnding.FAILED
    return None


def visible_text(html_text: str) -> str:
    """What an HTML frame shows as text (its tags dropped, entities read), for `ending_of` and the
    tool line: the renderer's own output, so no tag is ever split by a `>` inside an attribute."""
    return html.unescape(_TAG.sub("", html_text)).strip()
