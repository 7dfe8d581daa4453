"""What a frame looks like: pure text helpers shared by the stream state machine.

How a run that did not complete ends on the platform (docs/delivery.md lists every
text): the ending's words are appended to the last message that showed the run's
text, or, when nothing was shown (or that message cannot take them), they are a
message of their own. A resumed run replaces them with the resumed marker.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentstream.contracts import FinishReason, RunStatus

CURSOR = " ▉"
STOPPED_MARKER = " ⏹ stopped"
TOOL_LINE_PREFIX = "🔧 "
FIRST_SEND_MIN_CHARS = 4
ENDING_SEPARATOR = "\n\n"
RESUMED_MARKER = ENDING_SEPARATOR + "⤵ Cut off here; the answer was resumed below."
RESUMED_NOTICE = "⤵ The assistant was interrupted; its answer was resumed below."
FAILURE_PREFIX = "⚠️ The run failed: "

# One fixed text per reason; a failed run's own error is shown for any other reason.
ENDING_TEXTS: dict[FinishReason, str] = {
    FinishReason.RUNNER_LOST: "⚠️ The assistant stopped unexpectedly, before finishing its answer.",
    FinishReason.REBALANCED: "⚠️ The assistant was moved to another worker before finishing its answer.",
    FinishReason.SHUTDOWN: "⏸ The assistant was restarted before finishing its answer.",
    FinishReason.ABORTED: "⚠️ The answer ended unexpectedly.",
}
# Stops someone asked for: the short stopped marker; nothing at all when no text was shown.
USER_STOPS = frozenset({FinishReason.USER, FinishReason.RESET, FinishReason.DOUBLE_TEXTING})


@dataclass(frozen=True)
class Ending:
    """How a run that did not complete closes its stream on the platform."""

    marker: str  # appended to the last message that shows the run's text
    notice: str | None  # its own message: nothing was shown, or the marker cannot be appended; None: none

    @staticmethod
    def of(status: RunStatus, reason: FinishReason | None, error: str | None) -> Ending:
        if status is RunStatus.INTERRUPTED and (reason is None or reason in USER_STOPS):
            return Ending(STOPPED_MARKER, None)
        if reason is not None and (fixed := ENDING_TEXTS.get(reason)) is not None:
            return Ending(ENDING_SEPARATOR + fixed, fixed)
        text = failure_text(error)
        return Ending(ENDING_SEPARATOR + text, text)

    @property
    def follow_up(self) -> str:
        """The text as a message of its own below the run's text (a platform that cannot edit)."""
        return self.marker.strip()


def visible_chars(text: str) -> int:
    """Characters a reader can see: whitespace alone is not worth a platform message."""
    return sum(1 for ch in text if not ch.isspace())


def preview_frame(text: str) -> str:
    """An intermediate frame: the text so far plus the cursor that says "more is coming"."""
    return text + CURSOR


def stopped_frame(text: str) -> str:
    return text + STOPPED_MARKER


def failure_text(error: str | None) -> str:
    return f"{FAILURE_PREFIX}{error or 'unknown error'}"


def tool_line(tools: tuple[str, ...]) -> str:
    """The one tool progress line of a tool phase: every tool shown, in call order."""
    return TOOL_LINE_PREFIX + " → ".join(tools) + " …"
