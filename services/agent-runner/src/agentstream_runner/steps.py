"""Step bookkeeping: `step.started`, then `step.completed` (with a memory snapshot
for resume) or `step.failed`, around one LLM call or one round of tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from agentstream.contracts import ChatMessage, StepCompleted, StepFailed, StepStarted
from agentstream.contracts.events import StepType
from agentstream_runner.emitter import RunEmitter


@dataclass
class StepRecord:
    """Filled by the step's body; published with `step.completed`."""

    output: dict[str, Any] = field(default_factory=dict)
    memory: list[ChatMessage] = field(default_factory=list)


def _describe(err: BaseException) -> str:
    if isinstance(err, asyncio.CancelledError):
        return "interrupted"
    return str(err) or type(err).__name__


@asynccontextmanager
async def step(
    events: RunEmitter, step_type: StepType, step_id: str, step_input: dict[str, Any]
) -> AsyncIterator[StepRecord]:
    await events.emit(StepStarted, step_id=step_id, step_type=step_type, input=step_input)
    record = StepRecord()
    try:
        yield record
    except BaseException as err:
        await events.emit(StepFailed, step_id=step_id, step_type=step_type, input=step_input, error=_describe(err))
        raise
    await events.emit(
        StepCompleted,
        step_id=step_id,
        step_type=step_type,
        input=step_input,
        output=record.output,
        memory=list(record.memory),
    )
