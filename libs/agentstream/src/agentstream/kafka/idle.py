"""Idle consumers against a broker that does not wake parked fetches (Tansu).

Tansu answers a fetch only when its wait expires, so the wait is per-hop latency (10 ms) and
every consumer asks again every 10 ms, records or not: an idle embedded stack spent ~30 % of a
core (its own process plus the broker) fetching nothing. A longer wait would make the first
record of a burst wait it out on every hop.

Instead `IdleFetchGate` pauses a service's consumers (aiokafka's `pause`: no fetch at all)
once nothing arrived for `IdlePacing.after_s`, and while paused:

- resumes them at once when this process queues a record for one of their topics: every
  producer a service owns rings the process-wide `DOORBELL`. In the embedded stack every hop
  after the first is produced in the same process, so those records see no added latency;
- when one client per process, reading the end offsets of every paused consumer's topics
  every `IdlePacing.watch_s` (agentstream.kafka.end_watch; every `watch_hot_s` for
  `watch_hot_for_s` after an end moved), sees a topic's end move: records written by another
  process (`agentstream send`, another deployment's service) wait at most that long extra on
  their first hop after an idle spell;
- every `IdlePacing.poll_s`, resumes them for one fetch round (a probe, should the watcher
  fail) and pauses them again when it brought nothing.

A pause drops nothing: records fetched but not yet handed over are fetched again from the
consumer's position. Kafka wakes parked fetches on produce, so it gets no gate
(`BrokerTuning.idle` is None) and keeps its own 500 ms wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from aiokafka import AIOKafkaConsumer

from agentstream.kafka.tansu_reach import FetchPosition, fetch_positions, skip_repeated_commits


@dataclass(frozen=True)
class IdlePacing:
    """How an idle consumer is paced (see the module docstring)."""

    after_s: float  # this long without a record (or a doorbell ring): pause
    poll_s: float  # while paused: one probe fetch round this often (a fallback: see watch_s)
    watch_s: float | None = None  # end offsets of paused consumers' topics read this often, per process
    probe_timeout_s: float = 2.0  # a probe whose fetch does not come back by then counts as empty
    # ... and this often instead while a watched topic's end moved within `watch_hot_for_s`: a
    # conversation under way (its next message seconds later) wakes within this, a stack idle
    # for longer costs only the slower reading (docs/decisions.md).
    watch_hot_s: float | None = None
    watch_hot_for_s: float = 10.0

    def watch_interval(self, since_move_s: float) -> float | None:
        """How long the end watcher waits before its next reading, `since_move_s` after a watched end last moved."""
        if self.watch_hot_s is not None and since_move_s < self.watch_hot_for_s:
            return self.watch_hot_s
        return self.watch_s


class GateState(StrEnum):
    ACTIVE = "active"  # fetching with the flavor's wait
    PAUSED = "paused"  # no fetch until the doorbell rings or the next probe
    PROBING = "probing"  # resumed for one fetch round


class Doorbell:
    """Rung (per topic) whenever this process queues a record; waited on by paused consumers.
    One per process: the embedded stack's services ring each other's."""

    def __init__(self) -> None:
        self._rings: dict[str, int] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}

    def ring(self, topic: str) -> None:
        self._rings[topic] = self._rings.get(topic, 0) + 1
        waiters = self._waiters.pop(topic, None)
        if waiters:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def rings(self, topics: Iterable[str]) -> int:
        """How often any of `topics` was rung so far (compare two readings)."""
        return sum(self._rings.get(topic, 0) for topic in topics)

    async def wait(self, topics: Collection[str], timeout_s: float) -> bool:
        """True when one of `topics` is rung within `timeout_s`."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for topic in topics:
                waiting = self._waiters.get(topic)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[topic]


DOORBELL = Doorbell()


def flow_mark(positions: Iterable[dict[Any, FetchPosition]]) -> tuple[Any, ...] | None:
    """What changes when records flow: every partition's position and highwater. None while a
    consumer has records it has not handed over yet (or does not know its position): not quiet."""
    mark = []
    for consumer_positions in positions:
        for tp, at in sorted(consumer_positions.items()):
            if at.position is None or (at.highwater is not None and at.position < at.highwater):
                return None
            mark.append((tp, at.position, at.highwater))
    return tuple(mark)


class IdleFetchGate:
    """Paces the consumers of one service (they go quiet and wake together); `run` is its task.

    `consumers` is called on every step: a restart may replace them."""

    def __init__(
        self,
        consumers: Callable[[], Sequence[AIOKafkaConsumer]],
        topics: Collection[str],
        pacing: IdlePacing,
        doorbell: Doorbell = DOORBELL,
        positions: Callable[[AIOKafkaConsumer], dict[Any, FetchPosition]] = fetch_positions,
    ) -> None:
        self.consumers = consumers
        self.topics = tuple(topics)
        self.pacing = pacing
        self.doorbell = doorbell
        self.positions = positions
        self.state = GateState.ACTIVE
        self.pauses = 0  # times the consumers were paused (probes that found nothing included)
        self.awake = asyncio.Event()  # clear while PAUSED: a consume loop need not poll then
        self.awake.set()

    def _mark(self) -> tuple[tuple[Any, ...] | None, int]:
        consumers = self.consumers()
        for consumer in consumers:  # an idle committer would send its unchanged offsets forever
            skip_repeated_commits(consumer)
        return flow_mark(self.positions(c) for c in consumers), self.doorbell.rings(self.topics)

    async def run(self) -> None:
        try:
            while True:
                await self._until_quiet()
                await self._while_idle()
        finally:
            self._resume()

    async def _until_quiet(self) -> None:
        """ACTIVE until a whole `after_s` passes without a record or a ring."""
        self.state = GateState.ACTIVE
        mark = self._mark()
        while True:
            await asyncio.sleep(self.pacing.after_s)
            now = self._mark()
            if now == mark and now[0] is not None:
                return
            mark = now

    async def _while_idle(self) -> None:
        """PAUSED, probing every `poll_s`, until a ring or a probe that brought records."""
        while True:
            before = self._mark()
            self._pause()
            self.state = GateState.PAUSED
            rung = await self.doorbell.wait(self.topics, self.pacing.poll_s)
            self._resume()
            if rung:
                return
            self.state = GateState.PROBING
            await self._one_fetch_round()
            after = self._mark()
            if after != before or after[0] is None:
                return

    async def _one_fetch_round(self) -> None:
        """Until every assigned partition has a fetch response newer than now (or the timeout)."""
        since_ms = int(time.time() * 1000)
        deadline = time.monotonic() + self.pacing.probe_timeout_s
        while time.monotonic() < deadline:
            polled = [at.polled_ms for c in self.consumers() for at in self.positions(c).values()]
            if all(ms is not None and ms >= since_ms for ms in polled):
                return
            await asyncio.sleep(PROBE_CHECK_S)

    def _pause(self) -> None:
        self.pauses += 1
        self.awake.clear()
        for consumer in self.consumers():
            with contextlib.suppress(Exception):  # unassigned meanwhile: nothing to pause
                consumer.pause(*consumer.assignment())

    def _resume(self) -> None:
        for consumer in self.consumers():
            with contextlib.suppress(Exception):
                consumer.resume(*consumer.paused())
        self.awake.set()


PROBE_CHECK_S = 0.005
