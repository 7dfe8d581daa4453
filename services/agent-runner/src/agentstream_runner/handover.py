"""A `runs` partition moving to another runner: its runs finish here first (docs/decisions.md § Rebalance).

aiokafka awaits the revocation callback before the partitions move, so while it waits the
conversations of the revoked partitions still have one writer — this runner — and their new
owner reads nothing of them yet. The runs need what arrives meanwhile: tool results (on
`tool-results`) and interrupts (on `runs`), which the group's consumer does not hand over during
a rebalance. `ResultsReader` reads those partitions from the group consumer's positions with a
consumer of its own (no group, nothing committed) and routes only those records: a run that
would start is left to the partition's new owner, which reads everything again from the
committed offsets (the results and interrupts it finds there belong to runs that are over and
are ignored).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.config import KafkaSettings
from agentstream.kafka.flavor import tuning
from agentstream.kafka.security import client_security

Route = Callable[[bytes], None]


class ResultsReader:
    """Reads `positions` (partition → next offset) with a consumer of its own until closed; every
    record's value goes to `route`, which picks what it handles."""

    def __init__(
        self, kafka: KafkaSettings, positions: Mapping[TopicPartition, int], route: Route, client_id: str
    ) -> None:
        self._kafka = kafka
        self._positions = dict(positions)
        self._route = route
        self._client_id = client_id
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ResultsReader:
        if self._positions:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._kafka.bootstrap_servers,
                client_id=self._client_id,
                group_id=None,
                enable_auto_commit=False,
                fetch_max_wait_ms=tuning(self._kafka).fetch_max_wait_ms,
                **client_security(self._kafka),
            )
            await consumer.start()
            self._consumer = consumer
            consumer.assign(list(self._positions))
            for tp, offset in self._positions.items():
                consumer.seek(tp, offset)
            self._task = asyncio.create_task(self._read(consumer), name="runner-handover-reader")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await self._consumer.stop()

    async def _read(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for record in records:
                    if record.value:
                        self._route(record.value)
