"""What a frame looks like: pure text helpers shared by the stream state machine."""

from __future__ import annotations

CURSOR = " ▉"
STOPPED_MARKER = " ⏹ stopped"
FIRST_SEND_MIN_CHARS = 4


def visible_chars(text: str) -> int:
    """Characters a reader can see: whitespace alone is not worth a platform message."""
    return sum(1 for ch in text if not ch.isspace())


def preview_frame(text: str) -> str:
    """An intermediate frame: the text so far plus the cursor that says "more is coming"."""
    return text + CURSOR


def stopped_frame(text: str) -> str:
    return text + STOPPED_MARKER


def failure_text(error: str | None) -> str:
    return f"⚠️ The run failed: {error or 'unknown error'}"
