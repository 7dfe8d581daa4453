"""Type-checked by mypy (`make lint`, and tests/unit/lib/test_contracts_typing.py): a `match` over
the run event union that ends in `assert_never` names every event type it misses."""

from __future__ import annotations

from typing import assert_never

from agentstream.contracts import AnyRunEvent, RunEvent
from agentstream.contracts import events as ev


def describe(event: AnyRunEvent) -> str:
    match event:
        case ev.RunQueued() | ev.RunStarted() | ev.RunHeartbeat() | ev.RunFinished():
            return "run"
        case ev.MessageStarted() | ev.MessageDelta() | ev.MessageCompleted() | ev.SegmentBreak():
            return "message"
        case ev.ToolCall() | ev.ToolResult() | ev.ToolHeartbeat():
            return "tool"
        case ev.StepStarted() | ev.StepCompleted() | ev.StepFailed():
            return "step"
        case ev.Notice():
            return "notice"
        case _:
            assert_never(event)


def describe_decoded(event: RunEvent) -> str:
    """The annotated union (what `RunEventAdapter` returns) narrows the same way."""
    return describe(event)
