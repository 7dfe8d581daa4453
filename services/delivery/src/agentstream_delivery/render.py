"""What a frame looks like: pure text helpers shared by the stream state machine.

How a run that did not complete ends on the platform (docs/delivery.md lists every
text; `platforms.<name>.texts` changes them per platform): the ending's words are
appended to the last message that showed the run's text, or, when nothing was shown
(or that message cannot take them), they are a message of their own. A resumed run replaces them with the resumed marker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agentstream.config import PlatformTexts
from agentstream.contracts import FinishReason, RunStatus

CURSOR = " ▉"
FIRST_SEND_MIN_CHARS = 4
TOOL_RUNNING = " …"  # the tool line's end while a tool of it still runs
TOOL_OUTCOME = {True: " ✓", False: " ✗"}  # after a tool's name once its result came (`marks_tool_ends`)
ENDING_SEPARATOR = "\n\n"

# Stops someone asked for: the short stopped marker; nothing at all when no text was shown.
USER_STOPS = frozenset({FinishReason.USER, FinishReason.RESET, FinishReason.DOUBLE_TEXTING})


@dataclass(frozen=True)
class Ending:
    """How a run that did not complete closes its stream on the platform."""

    marker: str  # appended to the last message that shows the run's text
    notice: str | None  # its own message: nothing was shown, or the marker cannot be appended; None: none

    @staticmethod
    def of(status: RunStatus, reason: FinishReason | None, error: str | None) -> Ending:
        """The ending in the default texts (a platform's own: `FixedTexts.ending`)."""
        return DEFAULT_TEXTS.ending(status, reason, error)

    @property
    def follow_up(self) -> str:
        """The text as a message of its own below the run's text (a platform that cannot edit)."""
        return self.marker.strip()


@dataclass(frozen=True)
class FixedTexts:
    """The words delivery adds to a platform's messages, from `platforms.<name>.texts`."""

    stopped_marker: str
    tool_line_prefix: str
    failure_prefix: str
    resumed_marker: str
    resumed_notice: str
    endings: dict[FinishReason, str]  # one fixed text per reason; a failed run's own error for any other

    @classmethod
    def of(cls, conf: PlatformTexts) -> FixedTexts:
        return cls(
            stopped_marker=" " + conf.stopped,
            tool_line_prefix=conf.tool_line_prefix,
            failure_prefix=conf.failure_prefix,
            resumed_marker=ENDING_SEPARATOR + conf.resumed,
            resumed_notice=conf.resumed_notice,
            endings={
                FinishReason.RUNNER_LOST: conf.runner_lost,
                FinishReason.REBALANCED: conf.rebalanced,
                FinishReason.SHUTDOWN: conf.shutdown,
                FinishReason.ABORTED: conf.aborted,
            },
        )

    def ending(self, status: RunStatus, reason: FinishReason | None, error: str | None) -> Ending:
        if status is RunStatus.INTERRUPTED and (reason is None or reason in USER_STOPS):
            return Ending(self.stopped_marker, None)
        if reason is not None and (fixed := self.endings.get(reason)) is not None:
            return Ending(ENDING_SEPARATOR + fixed, fixed)
        text = self.failure_text(error)
        return Ending(ENDING_SEPARATOR + text, text)

    def failure_text(self, error: str | None) -> str:
        return f"{self.failure_prefix}{error or 'unknown error'}"

    def tool_line(self, tools: tuple[str, ...], ended: Mapping[str, bool] | None = None) -> str:
        """The one tool progress line of a tool phase: every tool shown, in call order; with `ended`
        (a tool's last outcome), each ended tool marked ✓/✗ and the line's `…` gone once all are."""
        ended = ended or {}
        names = " → ".join(t + TOOL_OUTCOME[ended[t]] if t in ended else t for t in tools)
        return self.tool_line_prefix + names + ("" if ended and all(t in ended for t in tools) else TOOL_RUNNING)


DEFAULT_TEXTS = FixedTexts.of(PlatformTexts())
# The default texts by name, for code that has no platform at hand.
STOPPED_MARKER = DEFAULT_TEXTS.stopped_marker
TOOL_LINE_PREFIX = DEFAULT_TEXTS.tool_line_prefix
FAILURE_PREFIX = DEFAULT_TEXTS.failure_prefix
RESUMED_MARKER = DEFAULT_TEXTS.resumed_marker
RESUMED_NOTICE = DEFAULT_TEXTS.resumed_notice
ENDING_TEXTS = DEFAULT_TEXTS.endings


def visible_chars(text: str) -> int:
    """Characters a reader can see: whitespace alone is not worth a platform message."""
    return sum(1 for ch in text if not ch.isspace())


def preview_frame(text: str) -> str:
    """An intermediate frame: the text so far plus the cursor that says "more is coming"."""
    return text + CURSOR


def stopped_frame(text: str) -> str:
    return text + STOPPED_MARKER


def failure_text(error: str | None) -> str:
    return DEFAULT_TEXTS.failure_text(error)


def tool_line(tools: tuple[str, ...], ended: Mapping[str, bool] | None = None) -> str:
    return DEFAULT_TEXTS.tool_line(tools, ended)
