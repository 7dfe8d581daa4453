"""Pure bookkeeping and the I/O pieces that make delivery crash-safe and polite:
commit points, run currency, the chat gate, and a stream resumed from its ledger."""

from __future__ import annotations

import asyncio
import io

import pytest
import structlog
from rich.console import Console

from agentstream.config import load_settings
from agentstream.contracts import FinishReason, LedgerState, MessageDelta, ReplyTarget, RunFinished, RunStarted
from agentstream.kafka.offsets import CommitPoints
from agentstream_delivery import bootstrap
from agentstream_delivery.adapters import MemoryAdapter
from agentstream_delivery.current_runs import CurrentRuns
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, MemoryLedger, sha256
from agentstream_delivery.ratelimit import ChatGate
from agentstream_delivery.render import ENDING_TEXTS, RESUMED_MARKER
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta

TARGET = ReplyTarget(platform="memory", chat_id="c1")


# -- commit points ------------------------------------------------------------------------------
def test_commit_stops_at_the_first_event_of_the_oldest_unfinished_stream():
    cp = CommitPoints()
    for off in range(10):
        cp.read(0, off)
    cp.hold(0, 3)
    cp.hold(0, 6)
    assert cp.due() == {0: 3}
    cp.committed({0: 3})
    assert cp.due() == {}
    cp.release(0, 3)
    assert cp.due() == {0: 6}
    cp.release(0, 6)
    assert cp.due() == {0: 10}


def test_partitions_are_independent_and_forgotten_on_revoke():
    cp = CommitPoints()
    cp.read(0, 4)
    cp.read(1, 9)
    cp.hold(1, 2)
    assert cp.due() == {0: 5, 1: 2}
    cp.forget({1})
    assert cp.due() == {0: 5}


# -- run currency --------------------------------------------------------------------------------
def test_newer_run_supersedes_the_older_and_finished_runs_stay_over():
    rc = CurrentRuns(limit=2)
    assert rc.start("k", "a") is None
    assert rc.start("k", "b") == "a"
    assert rc.is_over("a") and not rc.is_over("b")
    rc.end("b")
    assert rc.start("k", "c") is None  # b already finished: nothing to supersede
    rc.end("c")
    assert not rc.is_over("a")  # bounded memory: the oldest are forgotten


# -- the chat gate --------------------------------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_gate_schedules_after_retry_after_and_recovers_after_successes(monkeypatch: pytest.MonkeyPatch):
    clock = FakeClock()
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(round(delay, 3))
        clock.now += delay

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    gate = ChatGate(min_gap=1.0, clock=clock)
    await gate.acquire()
    await gate.acquire()
    assert slept == [1.0]  # the per-chat spacing
    assert gate.rate_limited(3.0) == 1
    await gate.acquire()
    assert slept[-1] == 3.0  # nothing before retry_after
    assert gate.gap == 2.0  # backed off
    gate.rate_limited(0.1)
    gate.rate_limited(0.1)
    assert gate.exhausted
    for _ in range(5):
        gate.succeeded()
    assert gate.strikes == 0 and gate.gap == 1.0


# -- a stream resumed from its ledger ------------------------------------------------------------
async def test_resumed_stream_edits_the_posted_message_instead_of_posting_again():
    memory = MemoryAdapter(edit_interval=0.01)
    posted = await memory.send(TARGET, "Hello wo ▉")  # before the crash
    ledger = MemoryLedger()
    scope = LedgerScope("memory", "c1", "r1", "memory:c1")
    await ledger.record(scope, LedgerEntry(0, "sent", posted, len("Hello wo ▉"), sha256("Hello wo ▉")))
    a = StreamActor(
        StreamKey.of("r1", TARGET),
        TARGET,
        memory,
        structlog.get_logger("test"),
        ledger=ledger,
        conversation_key="memory:c1",
    )
    a.start()
    for piece in ("Hello", " wo", "rld"):  # the replay from the committed offset
        a.feed(TextDelta("m1", piece))
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    [msg] = memory.messages("c1")
    assert msg.text == "Hello world" and msg.final
    assert ledger.rows[("memory", "c1", "r1", 0)].landed("Hello world")


async def test_send_cut_off_by_a_crash_is_unknown_and_the_final_goes_out_as_a_new_message():
    memory = MemoryAdapter(edit_interval=0.01)
    ledger = MemoryLedger()
    scope = LedgerScope("memory", "c1", "r1", "memory:c1")
    await ledger.record(scope, LedgerEntry(0, LedgerState.SENDING, None, 5, sha256("Hi ▉")))  # cut off by kill -9
    a = StreamActor(
        StreamKey.of("r1", TARGET),
        TARGET,
        memory,
        structlog.get_logger("test"),
        ledger=ledger,
        conversation_key="memory:c1",
    )
    a.start()
    a.feed(TextDelta("m1", "Hi there"))
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert [m.text for m in memory.messages("c1")] == ["Hi there"]  # the segment is not lost
    assert ledger.rows[("memory", "c1", "r1", 0)].landed("Hi there")


async def test_pending_row_never_left_and_is_sent_after_restart():
    memory = MemoryAdapter(edit_interval=0.01)
    ledger = MemoryLedger()
    scope = LedgerScope("memory", "c1", "r1", "memory:c1")
    await ledger.record(scope, LedgerEntry(0, LedgerState.PENDING))  # waited behind a 429 when killed
    a = StreamActor(
        StreamKey.of("r1", TARGET),
        TARGET,
        memory,
        structlog.get_logger("test"),
        ledger=ledger,
        conversation_key="memory:c1",
    )
    a.start()
    a.feed(Finish("completed", text="The whole answer"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert [m.text for m in memory.messages("c1")] == ["The whole answer"]
    assert {e.state for e in ledger.rows.values()} == {LedgerState.SENT}


# -- stale runs in the service ------------------------------------------------------------------
def _ids(run: str, seq: int) -> dict[str, object]:
    return {"run_id": run, "root_run_id": run, "conversation_key": "memory:c1", "seq": seq}


async def test_newer_run_stops_the_older_stream_and_late_events_are_dropped():
    svc = bootstrap(load_settings(), console=Console(file=io.StringIO()), ledger=MemoryLedger())
    for run in ("old", "new"):
        await svc.handle(RunStarted(**_ids(run, 1), assistant_id="a", connector_id="demo", reply_target=TARGET))
        await svc.handle(MessageDelta(**_ids(run, 2), message_id=f"{run}-m", text=f"{run} answer text"))
        await asyncio.sleep(0.05)
    await svc.handle(MessageDelta(**_ids("old", 3), message_id="old-m", text=" LATE"))
    await svc.handle(RunFinished(**_ids("new", 3), status="interrupted"))  # /stop
    await svc.handle(MessageDelta(**_ids("new", 4), message_id="new-m", text=" LATE"))
    await svc.memory.wait_for_final("c1", count=2, timeout=3)
    await asyncio.sleep(0.1)
    texts = [m.text for m in svc.memory.messages("c1")]
    assert texts == ["old answer text ⏹ stopped", "new answer text ⏹ stopped"]
    assert svc.streams.all() == []


def test_a_resumed_run_is_current_again_but_late_events_are_not():
    rc = CurrentRuns()
    rc.start("k", "a", 1)
    rc.end("a", 5)
    assert rc.is_over("a") and not rc.resumes("a", 3)
    assert rc.resumes("a", 6)
    rc.start("k", "a", 6)
    assert not rc.is_over("a")
    rc.start("k", "b", 1)  # superseded: never current again
    assert rc.is_over("a") and not rc.resumes("a", 10**6)


async def test_resumed_run_streams_below_what_the_first_attempt_showed():
    svc = bootstrap(load_settings(), console=Console(file=io.StringIO()), ledger=MemoryLedger())
    start = {"assistant_id": "a", "connector_id": "demo", "reply_target": TARGET}
    await svc.handle(RunStarted(**_ids("r", 1), **start))
    await svc.handle(MessageDelta(**_ids("r", 2), message_id="m1", text="First attempt"))
    await svc.handle(RunFinished(**_ids("r", 3), status="failed", reason="runner_lost"))
    await svc.handle(MessageDelta(**_ids("r", 3), message_id="m1", text=" stale"))  # a late event: dropped
    await svc.handle(RunStarted(**_ids("r", 4), **start))  # resumed: same root run, later seq
    await svc.handle(MessageDelta(**_ids("r", 5), message_id="m2", text="Resumed answer"))
    await svc.handle(RunFinished(**_ids("r", 6), status="completed", text="Resumed answer"))
    msgs = await svc.memory.wait_for(
        "c1", lambda ms: len(ms) == 2 and all(m.final for m in ms) and ms[0].text.endswith(RESUMED_MARKER), timeout=3
    )
    # The partial attempt ended visibly, then was re-marked; the answer is one message below it.
    assert msgs[0].history[-2:] == [
        "First attempt\n\n" + ENDING_TEXTS[FinishReason.RUNNER_LOST],
        "First attempt" + RESUMED_MARKER,
    ]
    assert msgs[1].text == "Resumed answer"
