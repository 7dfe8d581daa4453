"""The Tansu flavor's idle workarounds, as one part a service composes only on Tansu.

Tansu answers a fetch only when its wait expires (kafka/flavor.py), so an idle consumer is
paused (kafka/idle.py `IdleFetchGate`), woken by the process-wide doorbell that every producer
of the process rings (hooked here on the service's producer), when another process writes by its
notice (a broker on loopback: kafka/near_doorbell.py) or else the end watcher (kafka/end_watch.py),
or by its probe (docs/decisions.md § Idle consumers on
Tansu). Apache Kafka wakes parked fetches on produce: `idle_gating` gives it nothing, so none
of this (no doorbell hook, no gate, no watcher, no wrapped poll) exists there.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Collection

from faststream.kafka import KafkaBroker

from agentstream.config import KafkaSettings
from agentstream.kafka.end_watch import watch_ends
from agentstream.kafka.flavor import tuning
from agentstream.kafka.idle import DOORBELL, IdleFetchGate, IdlePacing
from agentstream.kafka.internals import consumers_of, producer_of
from agentstream.kafka.near_doorbell import NearDoorbell, join_near, leave_near
from agentstream.kafka.tansu_reach import on_append, poll_when


class IdleGating:
    """One `IdleFetchGate` per subscriber of a service's broker, the doorbell hook on its producer
    and, when the pacing has one, the end watcher of the gated topics."""

    def __init__(self, kafka: KafkaSettings, pacing: IdlePacing, name: str) -> None:
        self.kafka = kafka
        self.pacing = pacing
        self.name = name
        self.gates: list[IdleFetchGate] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._unwatch: Callable[[], Awaitable[None]] | None = None
        self.near: NearDoorbell | None = None  # the other processes' doorbells, on a broker on loopback
        self._near_topics: tuple[str, ...] = ()

    def start(self, broker: KafkaBroker, background: Collection[str] = ()) -> None:
        """Gate every subscriber of `broker` (started: its producer exists), each on its own;
        `background`: topics whose records are no one's message (a periodic republish), which do
        not keep the end watcher at its fast pace."""
        for sub in broker.subscribers:
            topics = tuple(getattr(sub, "topic_names", ()))
            if not topics:
                continue
            gate = IdleFetchGate(functools.partial(consumers_of, sub), topics, self.pacing)
            poll_when(sub, gate.awake.wait)
            self.gates.append(gate)
            self._tasks.append(asyncio.create_task(gate.run(), name=f"{self.name}-idle-fetch"))
        if self.near is None:
            self._near_topics = tuple({t for gate in self.gates for t in gate.topics})
            self.near = join_near(self.kafka.bootstrap_servers, self._near_topics)
        on_append(producer_of(broker), DOORBELL.ring, self.near.notify if self.near is not None else None)
        if self.gates and self.pacing.watch_s is not None:
            gated = {t for gate in self.gates for t in gate.topics}
            self._unwatch = watch_ends(self.kafka, gated, self.pacing, background)

    async def stop_gates(self) -> None:
        """The gates resume their consumers and end (a drain pauses partitions of its own)."""
        for task in self._tasks:
            task.cancel()
            await asyncio.wait({task})
        self._tasks.clear()
        self.gates.clear()

    async def stop(self) -> None:
        await self.stop_gates()
        if self._unwatch is not None:
            unwatch, self._unwatch = self._unwatch, None
            await unwatch()
        if self.near is not None:
            self.near = None
            leave_near(self.kafka.bootstrap_servers, self._near_topics)


def idle_gating(kafka: KafkaSettings, name: str) -> IdleGating | None:
    """The part for a service named `name`: on a flavor whose idle consumers need pacing (Tansu), else None."""
    pacing = tuning(kafka).idle
    return IdleGating(kafka, pacing, name) if pacing is not None else None
