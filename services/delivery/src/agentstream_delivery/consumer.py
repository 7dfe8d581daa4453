"""The stream consumer of one (root run, target): an explicit state machine, no I/O.

`transition(model, input, now)` returns the next model and the platform operations to
carry out (`Send`/`Edit`). Time comes in as `now`, so cadence is testable with a fake
clock; the caller owns the clock, the timer (`model.flush_at`) and the adapter calls.

States and transitions (anything not listed leaves the model unchanged):

    IDLE        nothing on the platform yet
      text          → IDLE        while fewer than 4 visible chars (or the platform cannot edit)
      text          → PREVIEWING  Send(frame + cursor)
      break         → SEALED      Send(final text) if any text is pending
      finish        → DELIVERED | INTERRUPTED | FAILED
    PREVIEWING  a platform message is open and edited with a cursor
      text, tick    → PREVIEWING  Edit(frame + cursor) at most once per edit_interval, never twice the same
      break         → SEALED      Edit(final text, no cursor)
      finish        → DELIVERED | INTERRUPTED | FAILED
    SEALED      the last platform message was finalized at a segment break
      text          → SEALED | PREVIEWING   as IDLE, on a new platform message
      break         → SEALED      Send(final text) if any text is pending
      finish        → DELIVERED | INTERRUPTED | FAILED
    DELIVERED, INTERRUPTED, FAILED are terminal: every input is ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

from agentstream.contracts import (
    MessageCompleted,
    MessageDelta,
    RunEvent,
    RunFinished,
    RunStatus,
    SegmentBreak,
)
from agentstream_delivery.render import (
    FIRST_SEND_MIN_CHARS,
    failure_text,
    preview_frame,
    stopped_frame,
    visible_chars,
)


class StreamState(Enum):
    IDLE = "idle"
    PREVIEWING = "previewing"
    SEALED = "sealed"
    DELIVERED = "delivered"
    INTERRUPTED = "interrupted"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (StreamState.DELIVERED, StreamState.INTERRUPTED, StreamState.FAILED)


_END_STATE: dict[RunStatus, StreamState] = {
    "completed": StreamState.DELIVERED,
    "interrupted": StreamState.INTERRUPTED,
    "failed": StreamState.FAILED,
}


@dataclass(frozen=True)
class Cadence:
    """How one platform wants to be streamed to (adapter defaults, settings override)."""

    edit_interval: float
    can_edit: bool = True
    min_first_chars: int = FIRST_SEND_MIN_CHARS


# -- inputs ------------------------------------------------------------------------
@dataclass(frozen=True)
class TextDelta:
    message_id: str
    text: str


@dataclass(frozen=True)
class TextCompleted:
    """The full text of a message: it replaces what the deltas of that message built."""

    message_id: str
    text: str


@dataclass(frozen=True)
class Break:
    pass


@dataclass(frozen=True)
class Tick:
    """The stream's timer fired: a held-back frame may now be due."""


@dataclass(frozen=True)
class Finish:
    status: RunStatus
    error: str | None = None
    text: str = ""


StreamInput = TextDelta | TextCompleted | Break | Tick | Finish


def stream_input(event: RunEvent) -> StreamInput | None:
    """The machine's view of a run event; None for events that do not change the stream."""
    match event:
        case MessageDelta(kind="text", message_id=mid, text=text):
            return TextDelta(mid, text)
        case MessageCompleted(message_id=mid, text=text):
            return TextCompleted(mid, text)
        case SegmentBreak():
            return Break()
        case RunFinished():
            return finish_input(event)
    return None  # thinking deltas, tool events, steps, heartbeats: not shown (tool progress: later)


def finish_input(event: RunFinished) -> Finish:
    return Finish(event.status, event.error or event.reason, event.text)


# -- operations --------------------------------------------------------------------
@dataclass(frozen=True)
class Send:
    """Post a new platform message; it becomes platform message number `segment`."""

    segment: int
    text: str
    final: bool


@dataclass(frozen=True)
class Edit:
    segment: int
    text: str
    final: bool


Op = Send | Edit


# -- the model ---------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """The text of one platform message: the messages streamed into it, in arrival order."""

    index: int = 0
    parts: tuple[tuple[str, str], ...] = ()

    @property
    def text(self) -> str:
        return "\n\n".join(t for _, t in self.parts if t)

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
    cadence: Cadence
    state: StreamState = StreamState.IDLE
    segment: Segment = field(default_factory=Segment)
    frame: str | None = None  # last text put on the platform for the current segment
    sealed_text: str | None = None  # final text of the previous segment (gets the stop marker)
    sealed_ids: frozenset[str] = frozenset()  # messages whose segment is sealed
    sent_at: float | None = None  # when the last send/edit of the current segment went out
    flush_at: float | None = None  # the stream's timer: a held-back frame is due then


Step = tuple[StreamModel, list[Op]]


def transition(model: StreamModel, inp: StreamInput, now: float) -> Step:
    handler = _TABLE.get((model.state, type(inp)))
    if handler is None:
        return model, []
    return handler(model, inp, now)


# -- handlers ----------------------------------------------------------------------
def _add_text(model: StreamModel, inp: StreamInput, now: float) -> Step:
    assert isinstance(inp, TextDelta | TextCompleted)
    if inp.message_id in model.sealed_ids:
        return model, []  # its segment is already final on the platform
    seg = model.segment.append(inp.message_id, inp.text) if isinstance(inp, TextDelta) \
        else model.segment.complete(inp.message_id, inp.text)
    model = replace(model, segment=seg)
    if model.state is StreamState.PREVIEWING:
        return _refresh(model, now)
    return _maybe_open(model, now)


def _maybe_open(model: StreamModel, now: float) -> Step:
    """IDLE/SEALED: the first platform message of a segment, once there is enough to show."""
    text = model.segment.text
    if not model.cadence.can_edit or visible_chars(text) < model.cadence.min_first_chars:
        return model, []
    frame = preview_frame(text)
    return replace(model, state=StreamState.PREVIEWING, frame=frame, sent_at=now, flush_at=None), [
        Send(model.segment.index, frame, final=False)
    ]


def _refresh(model: StreamModel, now: float) -> Step:
    """PREVIEWING: edit now if the interval has passed, else arm the timer."""
    frame = preview_frame(model.segment.text)
    if frame == model.frame:
        return replace(model, flush_at=None), []
    last = now if model.sent_at is None else model.sent_at
    due = last + model.cadence.edit_interval
    if now < due:
        return replace(model, flush_at=due), []
    return replace(model, frame=frame, sent_at=now, flush_at=None), [Edit(model.segment.index, frame, final=False)]


def _tick(model: StreamModel, inp: StreamInput, now: float) -> Step:
    if model.flush_at is None:
        return model, []
    return _refresh(model, now)


def _final_op(model: StreamModel, text: str) -> list[Op]:
    """The last frame of the current segment: an edit if it is on the platform, else a send."""
    if model.state is StreamState.PREVIEWING:
        return [] if text == model.frame else [Edit(model.segment.index, text, final=True)]
    return [Send(model.segment.index, text, final=True)]


def _seal(model: StreamModel, inp: StreamInput, now: float) -> Step:
    text = model.segment.text
    if model.state is not StreamState.PREVIEWING and not visible_chars(text):
        return model, []  # nothing to seal: later text simply continues this segment
    ops = _final_op(model, text)
    sealed = model.sealed_ids | {mid for mid, _ in model.segment.parts}
    return replace(
        model, state=StreamState.SEALED, segment=Segment(model.segment.index + 1), frame=None,
        sealed_text=text, sealed_ids=sealed, sent_at=None, flush_at=None,
    ), ops


def _finish(model: StreamModel, inp: StreamInput, now: float) -> Step:
    assert isinstance(inp, Finish)
    text = model.segment.text
    pending = model.state is StreamState.PREVIEWING or visible_chars(text) > 0
    ops: list[Op] = []
    match inp.status:
        case "completed":
            if pending:
                ops = _final_op(model, text)
            elif model.state is StreamState.IDLE and inp.text:
                ops = [Send(model.segment.index, inp.text, final=True)]  # nothing streamed: the answer itself
        case "interrupted":
            if pending:
                ops = _final_op(model, stopped_frame(text))
            elif model.state is StreamState.SEALED and model.sealed_text is not None:
                ops = [Edit(model.segment.index - 1, stopped_frame(model.sealed_text), final=True)]
        case "failed":
            if pending:
                ops = _final_op(model, text)
            if model.state is StreamState.IDLE:  # the user saw nothing (but maybe that text): say why
                after_text = model.segment.index + (1 if pending else 0)
                ops.append(Send(after_text, failure_text(inp.error), final=True))
    return replace(model, state=_END_STATE[inp.status], frame=None, flush_at=None), ops


Handler = Callable[[StreamModel, StreamInput, float], Step]

_LIVE = (StreamState.IDLE, StreamState.PREVIEWING, StreamState.SEALED)
_TABLE: dict[tuple[StreamState, type], Handler] = {
    **{(s, TextDelta): _add_text for s in _LIVE},
    **{(s, TextCompleted): _add_text for s in _LIVE},
    **{(s, Break): _seal for s in _LIVE},
    **{(s, Finish): _finish for s in _LIVE},
    (StreamState.PREVIEWING, Tick): _tick,
}
