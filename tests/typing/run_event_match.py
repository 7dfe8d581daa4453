"""Type-checked by mypy (`make lint`, and tests/unit/lib/test_contracts_typing.py): a `match` over
the run event union that ends in `assert_never` names every event type it misses."""

from __future__ import annotations

from typing import assert_never

from agentstream.contracts import (
    AnyRunEvent,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    RunEvent,
    RunFinished,
    RunHeartbeat,
    RunQueued,
    RunStarted,
    SegmentBreak,
    StepCompleted,
    StepFailed,
    StepStarted,
    ToolCall,
    ToolHeartbeat,
    ToolResult,
)


def describe(event: AnyRunEvent) -> str:
    match event:
        case RunQueued() | RunStarted() | RunHeartbeat() | RunFinished():
            return "run"
        case MessageStarted() | MessageDelta() | MessageCompleted() | SegmentBreak():
            return "message"
        case ToolCall() | ToolResult() | ToolHeartbeat():
            return "tool"
        case StepStarted() | StepCompleted() | StepFailed():
            return "step"
        case Notice():
            return "notice"
        case _:
            assert_never(event)


def describe_decoded(event: RunEvent) -> str:
    """The annotated union (what `RunEventAdapter` returns) narrows the same way."""
    return describe(event)
