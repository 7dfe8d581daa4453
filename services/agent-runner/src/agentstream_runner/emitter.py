"""The event emitter of one root run: identity fields and a strictly increasing seq.

Ingress emitted `run.queued` with seq 0, so the runner starts at 1. Events are
published one at a time under a lock and the seq is taken inside it, so the order
on the (single-partition-per-key) `events` topic is the seq order even when the
coalescer's timer and the pipeline emit concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentstream.contracts import EventBase, StartRun

EventT = TypeVar("EventT", bound=EventBase)
Publish = Callable[[EventBase], Awaitable[None]]

FIRST_RUNNER_SEQ = 1


class RunEmitter:
    def __init__(
        self, publish: Publish, *, run_id: str, conversation_key: str, epoch: int = 0, first_seq: int = FIRST_RUNNER_SEQ
    ) -> None:
        self._publish = publish
        self._identity: dict[str, Any] = {
            "run_id": run_id, "root_run_id": run_id, "parent_run_id": None, "depth": 0,
            "conversation_key": conversation_key, "epoch": epoch,
        }
        self._next_seq = first_seq
        self._lock = asyncio.Lock()

    @classmethod
    def for_start(cls, start: StartRun, publish: Publish, epoch: int = 0) -> RunEmitter:
        return cls(publish, run_id=start.run_id, conversation_key=start.conversation_key, epoch=epoch)

    @property
    def run_id(self) -> str:
        return str(self._identity["run_id"])

    async def emit(self, event_type: type[EventT], **fields: Any) -> EventT:
        async with self._lock:
            event = event_type(**self._identity, seq=self._next_seq, **fields)
            # Taken even if the publish fails: seq must only increase, gaps are fine.
            self._next_seq += 1
            await self._publish(event)
        return event
