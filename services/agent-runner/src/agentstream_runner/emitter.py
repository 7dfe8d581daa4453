"""The event emitter of one root run: identity fields and a strictly increasing seq.

Ingress emitted `run.queued` with seq 0, so the runner starts at 1. Events are
handed to the producer one at a time under a lock and the seq is taken inside it, so
the order on the (single-partition-per-key) `events` topic is the seq order even when
the coalescer's timer and the pipeline emit concurrently.

Pipelined, not one round trip per event: `emit` returns once the producer has the
event (the port returns the ack's future), so a token reaches Kafka without waiting
for the previous event's ack. `confirm()` waits for every ack so far — the pipeline
calls it after `run.finished` — and a failed ack fails the next `emit`. At most
`MAX_UNCONFIRMED` events are in flight per root run.

`step` is the bookkeeping around one LLM call or one round of tool calls: `step.started`,
then `step.completed` (with a memory snapshot for resume) or `step.failed`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agentstream.contracts import AnyRunEvent, ChatMessage, StartRun, StepCompleted, StepFailed, StepStarted
from agentstream.contracts.events import StepType

EventT = TypeVar("EventT", bound=AnyRunEvent)
Ack = asyncio.Future[Any]
# Hands the event over; returns its ack's future, or None when it is already stored.
Publish = Callable[[AnyRunEvent], Awaitable[Ack | None]]

FIRST_RUNNER_SEQ = 1
MAX_UNCONFIRMED = 256


class _Sequence:
    """The seq counter and unconfirmed acks of one root run, shared with its child runs' emitters."""

    def __init__(self, first: int) -> None:
        self.next = first
        self.lock = asyncio.Lock()
        self.unconfirmed: deque[Ack] = deque()

    def check_acks(self) -> None:
        """Forget the stored events; raise the error of one the broker refused (once).

        A root run's events share a key, hence a partition, whose acks come in send order:
        the done ones are at the front, so an emit looks at them only, not at every ack."""
        unconfirmed, refused = self.unconfirmed, None
        while unconfirmed and unconfirmed[0].done():
            ack = unconfirmed.popleft()
            if refused is None and not ack.cancelled():
                refused = ack.exception()
        if refused is not None:
            raise refused


class RunEmitter:
    def __init__(
        self, publish: Publish, *, run_id: str, conversation_key: str, epoch: int = 0, first_seq: int = FIRST_RUNNER_SEQ
    ) -> None:
        self._publish = publish
        self._identity: dict[str, Any] = {
            "run_id": run_id,
            "root_run_id": run_id,
            "parent_run_id": None,
            "depth": 0,
            "conversation_key": conversation_key,
            "epoch": epoch,
        }
        self._seq = _Sequence(first_seq)

    def child(self, run_id: str) -> RunEmitter:
        """The emitter of a delegated child run: same root stream and seq, one level deeper."""
        child = RunEmitter.__new__(RunEmitter)
        child._publish = self._publish
        child._identity = {**self._identity, "run_id": run_id, "parent_run_id": self.run_id, "depth": self.depth + 1}
        child._seq = self._seq
        return child

    @property
    def depth(self) -> int:
        return int(self._identity["depth"])

    @property
    def root_run_id(self) -> str:
        return str(self._identity["root_run_id"])

    @property
    def next_seq(self) -> int:
        return self._seq.next

    @classmethod
    def for_start(cls, start: StartRun, publish: Publish, epoch: int = 0) -> RunEmitter:
        return cls(publish, run_id=start.run_id, conversation_key=start.conversation_key, epoch=epoch)

    @property
    def run_id(self) -> str:
        return str(self._identity["run_id"])

    async def emit(self, event_type: type[EventT], **fields: Any) -> EventT:
        """Hand the event to the producer in seq order; see `confirm` for when it is stored."""
        async with self._seq.lock:
            self._seq.check_acks()
            event = event_type(**self._identity, seq=self._seq.next, **fields)
            # Taken even if the publish fails: seq must only increase, gaps are fine.
            self._seq.next += 1
            ack = await self._publish(event)
            if ack is not None:
                self._seq.unconfirmed.append(ack)
        if len(self._seq.unconfirmed) >= MAX_UNCONFIRMED:
            await self.confirm()
        return event

    async def confirm(self) -> None:
        """Until the broker has stored every event emitted so far; raises if it refused one."""
        if pending := [a for a in self._seq.unconfirmed if not a.done()]:
            # wait(), not gather(): cancelling this task must not cancel the producer's futures.
            await asyncio.wait(pending)
        self._seq.check_acks()


# -- steps -------------------------------------------------------------------------
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
