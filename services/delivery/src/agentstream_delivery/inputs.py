"""What the stream state machine reacts to, and what it asks the I/O side to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentstream.contracts import (
    DeltaKind,
    FinishReason,
    MessageCompleted,
    MessageDelta,
    RunEvent,
    RunFinished,
    RunStatus,
    SegmentBreak,
    ToolCall,
)


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
    """segment.break: a tool boundary seals the current platform message."""


@dataclass(frozen=True)
class ToolStarted:
    tool: str


@dataclass(frozen=True)
class Tick:
    """The stream's timer fired: a held-back frame may now be due."""


@dataclass(frozen=True)
class Degrade:
    """The chat hit its rate-limit strike limit: final text only from now on.

    `shown` is how much of the current message's text (cursor excluded) the platform
    shows; None if the message never landed.
    """

    shown: int | None = None


@dataclass(frozen=True)
class Finish:
    status: RunStatus
    reason: FinishReason | None = None
    error: str | None = None
    text: str = ""

    def __post_init__(self) -> None:  # plain strings (tests, the relay) become the contract's members
        object.__setattr__(self, "status", RunStatus(self.status))
        if self.reason is not None:
            object.__setattr__(self, "reason", FinishReason(self.reason))


StreamInput = TextDelta | TextCompleted | Break | ToolStarted | Tick | Degrade | Finish


def stream_input(event: RunEvent) -> StreamInput | None:
    """The machine's view of a run event; None for events that do not change the stream."""
    match event:
        case MessageDelta(kind=DeltaKind.TEXT, message_id=mid, text=text):
            return TextDelta(mid, text)
        case MessageCompleted(message_id=mid, text=text):
            return TextCompleted(mid, text)
        case SegmentBreak():
            return Break()
        case ToolCall(tool=tool, attempt=1):
            return ToolStarted(tool)
        case RunFinished():
            return finish_input(event)
    return None  # thinking deltas, tool results, steps, heartbeats: not shown


def finish_input(event: RunFinished) -> Finish:
    return Finish(event.status, event.reason, event.error, event.text)


# -- operations --------------------------------------------------------------------
OpRole = Literal["text", "progress", "notice"]


@dataclass(frozen=True)
class Send:
    """Post a new platform message; it becomes the run's platform message number `segment`."""

    segment: int
    text: str
    final: bool
    role: OpRole = "text"


@dataclass(frozen=True)
class Edit:
    segment: int
    text: str
    final: bool
    role: OpRole = "text"


Op = Send | Edit


def coalesce(ops: list[Op]) -> list[Op]:
    """Ops computed together, reduced to what must reach the platform.

    A later op on the same platform message supersedes an earlier non-final one (only
    the newest frame matters); a superseded `Send` keeps its place and becomes a send
    of the newest text. Final ops are never dropped.
    """
    out: list[Op] = []
    for op in ops:
        prev = next((i for i, o in enumerate(out) if o.segment == op.segment and o.role == op.role), None)
        if prev is None or out[prev].final:
            out.append(op)
            continue
        earlier = out[prev]
        out[prev] = Send(op.segment, op.text, op.final, op.role) if isinstance(earlier, Send) else op
    return out
