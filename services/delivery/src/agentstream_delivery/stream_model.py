"""The stream's model: its named states, the text of a segment, what is on the platform (pure data)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from agentstream.contracts import RunStatus
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.formatting import render_frame
from agentstream_delivery.platform_ops import Edit
from agentstream_delivery.render import CURSOR
from agentstream_delivery.splitting import safe_limit
from agentstream_delivery.think import visible_text


class StreamState(Enum):
    IDLE = "idle"
    PREVIEWING = "previewing"
    SEALED = "sealed"
    DEGRADED = "degraded"
    DELIVERED = "delivered"
    INTERRUPTED = "interrupted"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (StreamState.DELIVERED, StreamState.INTERRUPTED, StreamState.FAILED)


END_STATE: dict[RunStatus, StreamState] = {
    RunStatus.COMPLETED: StreamState.DELIVERED,
    RunStatus.INTERRUPTED: StreamState.INTERRUPTED,
    RunStatus.FAILED: StreamState.FAILED,
}


# -- the model ---------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """The text between two segment breaks: the messages streamed into it, in arrival order (raw)."""

    parts: tuple[tuple[str, str], ...] = ()

    def visible(self, *, final: bool) -> str:
        texts = (visible_text(t, final=final) for _, t in self.parts)
        return "\n\n".join(t for t in texts if t)

    def has(self, message_id: str) -> bool:
        return any(mid == message_id for mid, _ in self.parts)

    def append(self, message_id: str, text: str) -> Segment:
        if not self.has(message_id):
            return replace(self, parts=(*self.parts, (message_id, text)))
        return replace(self, parts=tuple((m, t + text if m == message_id else t) for m, t in self.parts))

    def complete(self, message_id: str, text: str) -> Segment:
        if not self.has(message_id):
            return replace(self, parts=(*self.parts, (message_id, text)))
        return replace(self, parts=tuple((m, text if m == message_id else t) for m, t in self.parts))


@dataclass(frozen=True)
class StreamModel:
    capabilities: Capabilities  # of the platform, with its settings applied
    state: StreamState = StreamState.IDLE
    segment: Segment = field(default_factory=Segment)
    msg: int = 0  # platform message index the current text goes to
    base: int = 0  # where that message starts in the segment's visible text (earlier ones were cut off)
    carry: str = ""  # what that message starts with: a code fence reopened after a cut
    frame: str | None = None  # last text put on the platform for that message
    shown: int = 0  # length of the body that frame showed (for buffer_threshold)
    sealed: tuple[int, str] | None = None  # (index, final text) of the last finalized text message
    sealed_ids: frozenset[str] = frozenset()  # model messages whose segment is sealed
    tools: tuple[str, ...] = ()  # tools of the current tool phase (progress line)
    progress: tuple[int, str] | None = None  # (index, text) of the tool line on the platform
    ended: tuple[tuple[str, bool], ...] = ()  # results of the phase's tools, in arrival order (`marks_tool_ends`)
    sent_at: float | None = None  # when the last send/edit of the current message went out
    flush_at: float | None = None  # the stream's timer: a held-back frame is due then
    # A run that did not complete: the edit that marks its ending message if the run is resumed.
    on_resume: Edit | None = None

    @property
    def live_preview(self) -> bool:
        return self.capabilities.can_edit and self.state is not StreamState.DEGRADED

    @property
    def safe_length(self) -> int:
        """Where a message is cut so that a frame with its cursor always fits."""
        return safe_limit(self.capabilities.max_length, CURSOR)

    def shows(self, frame: str) -> bool:
        """Whether the open message already shows the preview `frame`, compared as the platform gets it:
        two Markdown frames can render to the same markup (`<<<<\\n\\n` and `<<<<\\n\\n\\n\\n`), and an
        edit to what a message shows is refused (Telegram: 400 "message is not modified")."""
        if self.frame is None:
            return False
        if frame == self.frame:
            return True
        return self.render_preview(frame) == self.render_preview(self.frame)

    def render_preview(self, frame: str) -> str:
        """The preview `frame` as the platform gets it (cached: the deliverer sends this rendering)."""
        return render_frame(frame, self.capabilities.formatting, final=False)

    def shows_already(self, body: str) -> bool:
        """`shows(body + CURSOR)`, rendered only when `body` is what the frame showed plus whitespace:
        a cheap check for every delta (any other frame that renders alike is caught by `shows` when due)."""
        if (
            self.frame is None
            or not self.frame.endswith(CURSOR)
            or body.rstrip() != self.frame[: -len(CURSOR)].rstrip()
        ):
            return False
        return self.shows(body + CURSOR)

    def body(self, *, final: bool) -> str:
        return self.carry + self.segment.visible(final=final)[self.base :]
