"""Double texting: what a message does while its conversation has an active run."""

from __future__ import annotations

import asyncio

import pytest

from agentstream.contracts import DoubleTexting, ReplyTarget, ResumeRun, RunOptions, StartRun
from agentstream_runner.context import RunControl
from agentstream_runner.conversations.owner import Dismissal, OwnerState, Work, merge_starts
from agentstream_runner.conversations.registry import Conversations

KEY = "web:c1"


def start(run_id: str, text: str = "hi", policy: str = "enqueue", chat: str = "c1") -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=KEY,
        assistant_id="default",
        text=text,
        reply_target=ReplyTarget(platform="web", chat_id=chat),
        options={"double_texting": policy},
    )


class Runs:
    """Fake runs that block until released; records starts, ends, stop reasons and dismissals."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.texts: dict[str, str] = {}
        self.release: dict[str, asyncio.Event] = {}
        self.dismissed: list[tuple[str, Dismissal, str]] = []

    async def run(self, work: Work, control: RunControl) -> None:
        self.log.append(("start", work.run_id))
        if isinstance(work, StartRun):
            self.texts[work.run_id] = work.text
        try:
            await self.release.setdefault(work.run_id, asyncio.Event()).wait()
        except asyncio.CancelledError:
            self.log.append((f"stopped:{control.stop_reason}", work.run_id))
            return
        self.log.append(("end", work.run_id))

    async def dismiss(self, s: StartRun, why: Dismissal, detail: str) -> None:
        self.dismissed.append((s.run_id, why, detail))

    def finish(self, run_id: str) -> None:
        self.release.setdefault(run_id, asyncio.Event()).set()

    def owners(self, window_s: float = 0.05) -> Conversations:
        return Conversations(
            self.run,
            lambda s: DoubleTexting(s.options.double_texting),
            self.dismiss,
            collect_window_s=window_s,
        )


async def settle(seconds: float = 0.0) -> None:
    await asyncio.sleep(seconds)
    for _ in range(5):
        await asyncio.sleep(0)


async def test_enqueue_runs_the_second_message_after_the_first():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a"))
    owners.submit(start("b"))
    await settle()
    assert runs.log == [("start", "a")]
    runs.finish("a")
    await settle()
    assert runs.log == [("start", "a"), ("end", "a"), ("start", "b")] and runs.dismissed == []
    await owners.close()


async def test_interrupt_stops_the_active_run_and_runs_the_new_message():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a", policy="interrupt"))
    await settle()
    owners.submit(start("b", policy="interrupt"))
    await settle()
    assert runs.log == [("start", "a"), ("stopped:double_texting", "a"), ("start", "b")]
    await owners.close()


async def test_reject_refuses_the_new_message_and_keeps_the_active_run():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a", policy="reject"))
    await settle()
    owners.submit(start("b", policy="reject"))
    await settle()
    assert runs.dismissed == [("b", Dismissal.REJECTED, "a run is already in progress")]
    runs.finish("a")
    await settle()
    assert runs.log == [("start", "a"), ("end", "a")]  # b never runs
    owners.submit(start("c", policy="reject"))  # idle again: accepted
    await settle()
    assert runs.log[-1] == ("start", "c")
    await owners.close()


class LoopClock:
    """The running loop's clock, moved by the test alone: a debounce window is then measured in
    the test's seconds, never in how long a loaded machine took between two lines."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        loop = asyncio.get_running_loop()
        self.now = loop.time()
        monkeypatch.setattr(loop, "time", lambda: self.now)

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        await settle()


async def test_collect_debounces_then_merges_into_one_turn(monkeypatch: pytest.MonkeyPatch):
    clock = LoopClock(monkeypatch)
    runs = Runs()
    owners = runs.owners(window_s=0.1)
    owners.submit(start("a", "first", policy="collect"))
    await clock.advance(0.05)
    owners.submit(start("b", "second", policy="collect", chat="c1"))  # resets the window
    await clock.advance(0.06)
    assert runs.log == [] and owners.get(KEY).state is OwnerState.COLLECTING
    await clock.advance(0.1)
    assert runs.log == [("start", "a")] and runs.texts["a"] == "first\n\nsecond"
    assert runs.dismissed == [("b", Dismissal.MERGED, "a")]
    # While it runs, more messages are collected and run as one turn after it.
    owners.submit(start("c", "third", policy="collect"))
    owners.submit(start("d", "fourth", policy="collect"))
    await settle()
    assert runs.log == [("start", "a")]
    runs.finish("a")
    await settle()
    assert runs.log[-1] == ("start", "c") and runs.texts["c"] == "third\n\nfourth"
    assert runs.dismissed[-1] == ("d", Dismissal.MERGED, "c")
    await owners.close()


def test_merge_keeps_the_first_run_id_and_the_latest_target_and_options():
    a = start("a", "one", policy="collect", chat="c1")
    b = start("b", "two", policy="collect", chat="c1").model_copy(
        update={"options": RunOptions.model_validate({"x": 1})}
    )
    merged = merge_starts([a, b])
    assert (merged.run_id, merged.text, merged.options.as_dict()) == (
        "a",
        "one\n\ntwo",
        {"double_texting": "collect", "x": 1},
    )
    assert merge_starts([a]) is a


async def test_reset_drops_waiting_messages_and_stops_the_run():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a"))
    owners.submit(start("b"))
    await settle()
    owners.reset(KEY)
    await settle()
    assert ("stopped:reset", "a") in runs.log and ("start", "b") not in runs.log
    assert runs.dismissed == [("b", Dismissal.DROPPED, "reset")]


async def test_a_resume_waits_its_turn_whatever_the_policy():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a", policy="reject"))
    owners.resume(ResumeRun(conversation_key=KEY, run_id="old"))
    await settle()
    assert runs.log == [("start", "a")] and runs.dismissed == []
    runs.finish("a")
    await settle()
    assert runs.log[-1] == ("start", "old")
    await owners.close()


async def test_revoked_partitions_stop_their_runs_as_rebalanced_and_drop_queued():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a"), partition=1)
    owners.submit(start("b"), partition=1)
    other = start("c").model_copy(update={"conversation_key": "web:other"})
    owners.submit(other, partition=0)
    await settle()
    assert await owners.close_partitions({1}) == [KEY]
    assert ("stopped:rebalanced", "a") in runs.log
    assert runs.dismissed == [("b", Dismissal.DROPPED, "rebalanced")]
    assert owners.get("web:other") is not None and ("stopped:rebalanced", "c") not in runs.log
    await owners.close()


async def test_a_resume_of_a_run_alive_here_is_ignored():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a"))
    await settle()
    owners.resume(ResumeRun(conversation_key=KEY, run_id="a"))
    owners.resume(ResumeRun(conversation_key=KEY, run_id="old"))
    owners.resume(ResumeRun(conversation_key=KEY, run_id="old"))
    assert owners.get(KEY).queued == 1
    await owners.close()


async def test_active_runs_names_only_the_runs_running_now():
    """What the orphan scan leaves alone after a restarted embedded broker: runs still running here."""
    runs = Runs()
    owners = runs.owners()
    assert owners.active_runs() == set()
    owners.submit(start("a"))
    owners.submit(start("b"))  # waits behind a: not running
    await settle()
    assert owners.active_runs() == {"a"}
    runs.finish("a")
    await settle()
    assert owners.active_runs() == {"b"}
    runs.finish("b")
    await settle()
    assert owners.active_runs() == set()
    await owners.close()


async def test_a_resume_of_a_start_that_does_not_start_runs_once_the_start_turned_out_so():
    """A StartRun read again after its runner died (docs/decisions.md § Orphaned runs) is held by
    its check while the ResumeRun behind it arrives: the resume runs once the start did not."""
    runs = Runs()

    async def run(work: Work, control: RunControl) -> None:
        if isinstance(work, StartRun) and work.run_id == "a":
            await asyncio.sleep(0.01)  # the launcher's check
            control.not_started = True
            runs.log.append(("not started", "a"))
            return
        await runs.run(work, control)

    owners = Conversations(run, lambda s: DoubleTexting.ENQUEUE, runs.dismiss)
    owners.submit(start("a"))
    await settle()
    owners.resume(ResumeRun(conversation_key=KEY, run_id="a"))
    await settle(0.05)
    assert runs.log == [("not started", "a"), ("start", "a")]
    runs.finish("a")
    await owners.close()


async def test_a_resume_held_behind_a_start_that_ran_is_ignored():
    runs = Runs()
    owners = runs.owners()
    owners.submit(start("a"))
    await settle()
    owners.resume(ResumeRun(conversation_key=KEY, run_id="a"))  # declared lost, still running here
    runs.finish("a")
    await settle()
    assert runs.log == [("start", "a"), ("end", "a")]
    assert owners.get(KEY) is None  # idle, forgotten: nothing queued
    await owners.close()
