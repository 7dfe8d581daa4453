"""Pausing idle consumers against a broker that does not wake parked fetches."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition

from agentstream.kafka.idle import Doorbell, GateState, IdleFetchGate, IdlePacing, flow_mark
from agentstream.kafka.tansu_reach import FetchPosition

TP = TopicPartition("t", 0)


class FakeConsumer:
    """What the gate uses of an aiokafka consumer: assignment, pause/resume, positions."""

    def __init__(self) -> None:
        self.at = FetchPosition(position=5, highwater=5, polled_ms=None)
        self._paused: set[TopicPartition] = set()

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    def pause(self, *tps: TopicPartition) -> None:
        self._paused |= set(tps)

    def resume(self, *tps: TopicPartition) -> None:
        self._paused -= set(tps)

    def paused(self) -> set[TopicPartition]:
        return set(self._paused)


def positions(consumer: Any) -> dict[TopicPartition, FetchPosition]:
    return {TP: consumer.at}


def gate_for(consumer: FakeConsumer, doorbell: Doorbell, poll_s: float = 0.05) -> IdleFetchGate:
    return IdleFetchGate(
        lambda: [consumer],  # type: ignore[list-item]
        ["t"],
        IdlePacing(after_s=0.02, poll_s=poll_s, probe_timeout_s=0.02),
        doorbell=doorbell,
        positions=positions,
    )


async def eventually(condition: Any, timeout: float = 5.0) -> None:
    """Until `condition()` holds: the gate runs on timers, and a loaded machine runs them late."""
    for _ in range(int(timeout / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    assert condition()


def test_flow_mark_is_none_while_records_wait_or_the_position_is_unknown() -> None:
    assert flow_mark([{TP: FetchPosition(3, 5, 1)}]) is None
    assert flow_mark([{TP: FetchPosition(None, None, None)}]) is None
    assert flow_mark([{TP: FetchPosition(5, 5, 1)}]) == ((TP, 5, 5),)
    # Tansu's highwater may lag a batch's last record: a position past it is caught up
    assert flow_mark([{TP: FetchPosition(7, 5, 1)}]) == ((TP, 7, 5),)


async def test_a_quiet_consumer_is_paused_and_a_ring_resumes_it_at_once() -> None:
    consumer, doorbell = FakeConsumer(), Doorbell()
    gate = gate_for(consumer, doorbell, poll_s=5.0)
    task = asyncio.create_task(gate.run())
    await eventually(lambda: gate.state is GateState.PAUSED and consumer.paused() == {TP})
    doorbell.ring("other-topic")
    await asyncio.sleep(0.005)
    assert consumer.paused() == {TP}
    doorbell.ring("t")  # at once: the next poll is 5 s away
    await eventually(lambda: gate.state is GateState.ACTIVE and consumer.paused() == set(), timeout=2.5)
    task.cancel()
    await asyncio.wait({task})
    assert consumer.paused() == set()  # a stopped gate leaves nothing paused


async def test_a_probe_that_brings_records_makes_the_consumer_active() -> None:
    consumer, doorbell = FakeConsumer(), Doorbell()
    gate = gate_for(consumer, doorbell)
    task = asyncio.create_task(gate.run())
    await eventually(lambda: gate.pauses >= 2)  # probes found nothing: paused again each time
    consumer.at = FetchPosition(position=5, highwater=8, polled_ms=None)  # another process wrote
    await eventually(lambda: gate.state is GateState.ACTIVE and consumer.paused() == set())
    task.cancel()
    await asyncio.wait({task})


async def test_a_consumer_with_records_to_hand_over_is_never_paused() -> None:
    consumer, doorbell = FakeConsumer(), Doorbell()
    consumer.at = FetchPosition(position=1, highwater=9, polled_ms=None)
    gate = gate_for(consumer, doorbell)
    task = asyncio.create_task(gate.run())
    await asyncio.sleep(0.1)
    assert gate.pauses == 0 and gate.state is GateState.ACTIVE
    task.cancel()
    await asyncio.wait({task})


async def test_doorbell_wait_times_out_and_forgets_its_waiter() -> None:
    doorbell = Doorbell()
    assert await doorbell.wait(["a", "b"], 0.01) is False
    assert doorbell._waiters == {}
    doorbell.ring("a")
    assert doorbell.rings(["a", "b"]) == 1


def test_the_end_watcher_reads_fast_only_for_a_while_after_an_end_moved() -> None:
    pacing = IdlePacing(after_s=0.25, poll_s=5.0, watch_s=0.1, watch_hot_s=0.01, watch_hot_for_s=10.0)
    assert pacing.watch_interval(0.5) == 0.01  # a conversation under way
    assert pacing.watch_interval(10.0) == 0.1  # cooled down: an idle stack pays the slow reading only
    assert pacing.watch_interval(float("inf")) == 0.1  # nothing moved since the start
    assert IdlePacing(after_s=0.25, poll_s=5.0, watch_s=0.1).watch_interval(0.5) == 0.1  # no hot pace set
