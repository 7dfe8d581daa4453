"""What the stream state machine reacts to: run events as it sees them, its timer, the chat's degradation.

One input is made per token and inputs queue in a stream's inbox while a call is in flight: they
have slots (no dict per instance: a third of the memory of a delta, and quicker to build).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from agentstream.contracts import (
    DeltaKind,
    FinishReason,
    MessageCompleted,
    MessageDelta,
    RunFinished,
    RunProgressEvent,
    RunStatus,
    SegmentBreak,
    ToolCall,
    ToolResult,
)
from agentstream.contracts import events as ev


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text of a message (`message.delta kind=text`): appended to what the message shows."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class TextCompleted:
    """The full text of a message: it replaces what the deltas of that message built."""

    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Break:
    """segment.break: a tool boundary seals the current platform message."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call's first attempt (`tool.call`): the tool line, when the platform shows tool progress."""

    tool: str


@dataclass(frozen=True, slots=True)
class ToolEnded:
    """A tool call's result (`tool.result`): the tool line marks the tool done, on a platform that shows it."""

    tool: str
    ok: bool


@dataclass(frozen=True, slots=True)
class Tick:
    """The stream's timer fired: a held-back frame may now be due."""


@dataclass(frozen=True, slots=True)
class Degrade:
    """The chat hit its rate-limit strike limit: final text only from now on.

    `shown` is how much of the current message's text (cursor excluded) the platform
    shows; None if the message never landed.
    """

    shown: int | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """The run ended (`run.finished`, or a newer run superseding this one): the final text and ending."""

    status: RunStatus
    reason: FinishReason | None = None
    error: str | None = None
    text: str = ""

    def __post_init__(self) -> None:  # plain strings (tests, the relay) become the contract's members
        object.__setattr__(self, "status", RunStatus(self.status))
        if self.reason is not None:
            object.__setattr__(self, "reason", FinishReason(self.reason))


StreamInput = TextDelta | TextCompleted | Break | ToolStarted | ToolEnded | Tick | Degrade | Finish


def stream_input(event: RunProgressEvent | RunFinished) -> StreamInput | None:
    """The machine's view of a run event; None for events that do not change the stream."""
    match event:
        case MessageDelta():
            return (
                TextDelta(event.message_id, event.text) if event.kind == DeltaKind.TEXT else None
            )  # thinking: not shown
        case MessageCompleted():
            return TextCompleted(event.message_id, event.text)
        case SegmentBreak():
            return Break()
        case ToolCall():
            return ToolStarted(event.tool) if event.attempt == 1 else None  # a retry shows no new tool
        case ToolResult():
            return ToolEnded(event.tool, event.ok)
        case RunFinished():
            return finish_input(event)
        case (
            ev.MessageStarted()
            | ev.StepStarted()
            | ev.StepCompleted()
            | ev.StepFailed()
            | ev.RunHeartbeat()
            | ev.ToolHeartbeat()
        ):
            return None  # steps, heartbeats: not shown
        case _:
            assert_never(event)


def finish_input(event: RunFinished) -> Finish:
    return Finish(event.status, event.reason, event.error, event.text)
