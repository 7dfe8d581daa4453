"""What a frame looks like: pure text helpers shared by the stream state machine."""

from __future__ import annotations

CURSOR = " ▉"
STOPPED_MARKER = " ⏹ stopped"
TOOL_LINE_PREFIX = "🔧 "
FIRST_SEND_MIN_CHARS = 4
RUNNER_LOST = "runner_lost"


def visible_chars(text: str) -> int:
    """Characters a reader can see: whitespace alone is not worth a platform message."""
    return sum(1 for ch in text if not ch.isspace())


def preview_frame(text: str) -> str:
    """An intermediate frame: the text so far plus the cursor that says "more is coming"."""
    return text + CURSOR


def stopped_frame(text: str) -> str:
    return text + STOPPED_MARKER


def failure_text(error: str | None) -> str:
    if error == RUNNER_LOST:
        return "⚠️ The assistant stopped answering (its worker was lost). Please send your message again."
    return f"⚠️ The run failed: {error or 'unknown error'}"


def tool_line(tools: tuple[str, ...]) -> str:
    """The one tool progress line of a tool phase: every tool shown, in call order."""
    return TOOL_LINE_PREFIX + " → ".join(tools) + " …"
