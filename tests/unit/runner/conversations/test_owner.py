import asyncio

import structlog
from structlog.testing import LogCapture, capture_logs

from agentstream.config.runner import RunnerSettings
from agentstream.contracts import DoubleTexting, FinishReason, ReplyTarget, ResumeRun, StartRun
from agentstream.kafka.producer import OutputHeld
from agentstream_runner.context import RunControl
from agentstream_runner.conversations.owner import (
    DEFAULT_COLLECT_WINDOW_S,
    Conversation,
    Dismissal,
    OwnerState,
    Work,
    merge_starts,
)
from agentstream_runner.conversations.registry import Conversations


def start(run_id: str, key: str = "web:c1") -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=key,
        assistant_id="default",
        text="hi",
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )


class Recorder:
    """A fake run: records start/end, blocks until released, reports cancellation like the pipeline."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.release: dict[str, asyncio.Event] = {}
        self.stop_reasons: dict[str, str | None] = {}

    async def __call__(self, s: StartRun, control: RunControl) -> None:
        self.log.append(("start", s.run_id))
        gate = self.release.setdefault(s.run_id, asyncio.Event())
        try:
            await gate.wait()
        except asyncio.CancelledError:
            self.stop_reasons[s.run_id] = control.stop_reason
            self.log.append(("interrupted", s.run_id))
            return
        if s.run_id.startswith("crash"):
            raise RuntimeError("bug")
        self.log.append(("end", s.run_id))

    def finish(self, run_id: str) -> None:
        self.release.setdefault(run_id, asyncio.Event()).set()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_enqueue_runs_one_after_another_and_submit_never_blocks():
    runs = Recorder()
    owners = Conversations(runs)
    owners.submit(start("a"))
    owners.submit(start("b"))
    await settle()
    assert runs.log == [("start", "a")]  # b waits for a
    owner = owners.get("web:c1")
    assert owner.state is OwnerState.RUNNING and owner.active_run_id == "a" and owner.queued == 1
    runs.finish("a")
    await settle()
    assert runs.log == [("start", "a"), ("end", "a"), ("start", "b")]
    runs.finish("b")
    await settle()
    assert owner.state is OwnerState.IDLE and len(owners) == 0  # idle owners are forgotten


async def test_conversations_run_in_parallel():
    runs = Recorder()
    owners = Conversations(runs)
    owners.submit(start("a", key="web:c1"))
    owners.submit(start("b", key="web:c2"))
    await settle()
    assert sorted(runs.log) == [("start", "a"), ("start", "b")]
    await owners.close()


async def test_interrupt_cancels_the_active_run_only():
    runs = Recorder()
    owners = Conversations(runs)
    owners.submit(start("a"))
    owners.submit(start("b"))
    await settle()
    assert not owners.interrupt("web:c1", "b", "user")  # b is queued, not active
    assert not owners.interrupt("web:other", None, "user")
    assert owners.interrupt("web:c1", None, "user")
    await settle()
    assert runs.stop_reasons == {"a": "user"}
    assert runs.log[-1] == ("start", "b")  # the next one starts
    await owners.close()


async def test_interrupt_right_after_submit_reaches_the_run():
    runs = Recorder()
    owners = Conversations(runs)
    owners.submit(start("a"))
    assert owners.interrupt("web:c1", "a", "user")  # before the run task ran a single step
    await settle()
    assert runs.log == [("start", "a"), ("interrupted", "a")]


async def test_a_crashing_run_does_not_stop_the_conversation():
    runs = Recorder()
    owners = Conversations(runs)
    owners.submit(start("crash-1"))
    owners.submit(start("b"))
    runs.finish("crash-1")
    await settle()
    assert ("start", "b") in runs.log
    await owners.close()


async def test_close_drops_queued_and_interrupts_active_as_shutdown():
    runs = Recorder()
    owners = Conversations(runs)
    owners.submit(start("a"))
    owners.submit(start("b"))
    await settle()
    await owners.close()
    assert runs.stop_reasons == {"a": "shutdown"}
    assert ("start", "b") not in runs.log and len(owners) == 0


def test_the_four_policies_exist():
    assert [p.value for p in DoubleTexting] == ["enqueue", "interrupt", "reject", "collect"]


async def test_a_resume_arriving_after_the_owner_closed_starts_nothing():
    runs = Recorder()
    owner = Conversation("web:c1", runs)
    await owner.close(FinishReason.REBALANCED)
    owner.resume(ResumeRun(conversation_key="web:c1", run_id="old"))
    await settle()
    assert runs.log == [] and owner.state is OwnerState.CLOSED and owner.queued == 0


async def test_collect_waits_the_default_window_the_same_as_the_settings_default():
    assert RunnerSettings().collect_window_ms / 1000 == DEFAULT_COLLECT_WINDOW_S
    runs = Recorder()
    owner = Conversation("web:c1", runs, policy_for=lambda _: DoubleTexting.COLLECT)
    owner.submit(start("a"))
    await asyncio.sleep(DEFAULT_COLLECT_WINDOW_S * 0.8)
    assert runs.log == [] and owner.state is OwnerState.COLLECTING
    await asyncio.sleep(DEFAULT_COLLECT_WINDOW_S * 0.4)
    await settle()
    assert runs.log == [("start", "a")]
    await owner.close()


KEY = "web:c1"


def message(run_id: str, text: str = "hi", chat: str = "c1", **metadata: str) -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=KEY,
        assistant_id="default",
        text=text,
        reply_target=ReplyTarget(platform="web", chat_id=chat),
        metadata=metadata,
    )


class Owned:
    """Fake runs and endings: runs block until released, an ending can be held back, `crash*` ids fail."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.release: dict[str, asyncio.Event] = {}
        self.dismissed: list[tuple[str, Dismissal, str]] = []
        self.dismiss_gate: asyncio.Event | None = None

    async def run(self, work: Work, control: RunControl) -> None:
        self.log.append(("start", work.run_id))
        try:
            await self.release.setdefault(work.run_id, asyncio.Event()).wait()
        except asyncio.CancelledError:
            self.log.append((f"stopped:{control.stop_reason}", work.run_id))
            return
        if work.run_id.startswith("crash"):
            raise RuntimeError("bug in the run")
        self.log.append(("end", work.run_id))

    async def dismiss(self, s: StartRun, why: Dismissal, detail: str) -> None:
        if self.dismiss_gate is not None:
            await self.dismiss_gate.wait()
        if s.run_id.startswith("crash"):
            raise RuntimeError("cannot publish the ending")
        self.dismissed.append((s.run_id, why, detail))

    def finish(self, run_id: str) -> None:
        self.release.setdefault(run_id, asyncio.Event()).set()


async def settle_after(seconds: float) -> None:
    await asyncio.sleep(seconds)
    await settle()


def test_a_new_owner_is_idle_on_no_partition_yet():
    owner = Conversation(KEY, Owned().run)
    assert (owner.state, owner.partition, owner.active_run_id, owner.queued) == (OwnerState.IDLE, None, None, 0)


def test_a_merged_turn_answers_where_the_latest_message_came_from_with_all_metadata():
    merged = merge_starts([message("a", "one", chat="c1", lang="en", x="1"), message("b", "two", chat="c2", x="2")])
    assert merged.reply_target == ReplyTarget(platform="web", chat_id="c2")
    assert merged.metadata == {"lang": "en", "x": "2"}


async def test_a_message_after_close_is_dismissed_as_dropped_at_shutdown():
    runs = Owned()
    owner = Conversation(KEY, runs.run, dismiss=runs.dismiss)
    await owner.close(FinishReason.REBALANCED)
    owner.submit(message("late"))
    await settle()
    assert runs.log == [] and runs.dismissed == [("late", Dismissal.DROPPED, FinishReason.SHUTDOWN)]


async def test_close_waits_for_the_endings_of_dropped_work():
    runs = Owned()
    runs.dismiss_gate = asyncio.Event()
    owner = Conversation(KEY, runs.run, dismiss=runs.dismiss)
    owner.submit(message("a"))
    owner.submit(message("b"))
    await settle()
    closing = asyncio.create_task(owner.close())
    await settle()
    assert not closing.done() and runs.dismissed == []  # b's ending is still being published
    runs.dismiss_gate.set()
    await asyncio.wait_for(closing, 1)
    assert runs.dismissed == [("b", Dismissal.DROPPED, FinishReason.SHUTDOWN)]


async def test_a_second_interrupt_keeps_the_first_reason_and_says_the_run_is_stopping():
    runs = Owned()
    owner = Conversation(KEY, runs.run)
    owner.submit(message("a"))
    await settle()
    assert owner.interrupt(None, FinishReason.USER) is True
    assert owner.interrupt("a", FinishReason.RESET) is True
    await settle()
    assert runs.log == [("start", "a"), ("stopped:user", "a")]


async def test_an_owner_whose_run_ended_has_nothing_to_interrupt():
    runs = Owned()
    owner = Conversation(KEY, runs.run)
    owner.submit(message("a"))
    await settle()
    runs.finish("a")
    await settle()
    assert owner.active_run_id is None and owner.state is OwnerState.IDLE
    assert owner.interrupt(None, FinishReason.USER) is False


async def test_a_reset_while_collecting_goes_idle_and_collecting_starts_afresh():
    runs = Owned()
    owner = Conversation(
        KEY, runs.run, policy_for=lambda _: DoubleTexting.COLLECT, dismiss=runs.dismiss, collect_window_s=0.05
    )
    owner.submit(message("a"))
    assert owner.state is OwnerState.COLLECTING
    owner.reset()
    assert owner.state is OwnerState.IDLE and owner.queued == 0
    await settle_after(0.08)
    assert runs.log == [] and runs.dismissed == [("a", Dismissal.DROPPED, FinishReason.RESET)]
    owner.submit(message("b"))
    await settle_after(0.08)
    assert runs.log == [("start", "b")]
    await owner.close()


async def test_a_crashed_run_is_logged_with_its_run_id_and_traceback():
    runs = Owned()
    owner = Conversation(KEY, runs.run)
    with capture_logs() as logs:
        owner.submit(message("crash-1"))
        await settle()
        runs.finish("crash-1")
        await settle()
        owner.submit(message("b"))
        await settle()
        runs.finish("b")
        await settle()
    crashed = [e for e in logs if e["event"] == "run crashed"]
    assert len(crashed) == 1 and crashed[0]["run_id"] == "crash-1"
    assert crashed[0]["conversation"] == KEY and isinstance(crashed[0]["exc_info"], RuntimeError)


async def test_a_dismissal_that_fails_is_logged_and_a_finished_one_is_not_kept():
    runs = Owned()
    owner = Conversation(KEY, runs.run, dismiss=runs.dismiss)
    await owner.close()
    with capture_logs() as logs:
        owner.submit(message("crash-1"))
        owner.submit(message("b"))
        await settle()
    failed = [e for e in logs if e["event"] == "could not end a run that did not start"]
    assert len(failed) == 1 and isinstance(failed[0]["exc_info"], RuntimeError)
    assert runs.dismissed == [("b", Dismissal.DROPPED, FinishReason.SHUTDOWN)]
    assert owner._side_tasks == set()  # finished endings are not held on to


async def test_the_owner_logs_under_its_module_name():
    capture = LogCapture()
    structlog.configure(
        processors=[structlog.stdlib.add_logger_name, capture],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
    )
    try:
        owner = Conversation(KEY, Owned().run)
        await owner.close()
        owner.resume(ResumeRun(conversation_key=KEY, run_id="old"))
    finally:
        structlog.reset_defaults()
    assert [(e["event"], e["logger"], e["conversation"]) for e in capture.entries] == [
        ("resume refused: owner closed", "agentstream_runner.conversations.owner", KEY)
    ]


async def test_an_enqueued_message_during_the_collect_window_runs_first_and_collecting_works_after():
    runs = Owned()
    owner = Conversation(
        KEY,
        runs.run,
        policy_for=lambda s: DoubleTexting(s.metadata.get("policy", "collect")),
        collect_window_s=0.05,
    )
    owner.submit(message("a"))
    owner.submit(message("b", policy="enqueue"))  # ends the window: queued work runs at once
    await settle()
    assert runs.log == [("start", "b")]
    runs.finish("b")
    await settle()
    assert runs.log[-1] == ("start", "a")  # the collected message runs next, without a new window
    runs.finish("a")
    await settle()
    owner.submit(message("c"))
    assert owner.state is OwnerState.COLLECTING
    await settle_after(0.08)
    assert runs.log[-1] == ("start", "c")
    await owner.close()


async def test_a_repeated_start_is_ignored_while_queued_active_or_finished():
    # ingress re-reading a batch after a crash repeats its StartRuns under the same run ids
    runs = Recorder()
    owners = Conversations(runs, known_runs=3)
    assert owners.submit(start("a")) is True
    assert owners.submit(start("b")) is True
    assert owners.submit(start("a")) is False  # active
    assert owners.submit(start("b")) is False  # queued
    await settle()
    assert owners.get("web:c1").queued == 1
    runs.finish("a")
    await settle()
    runs.finish("b")
    await settle()
    assert owners.submit(start("a")) is False  # finished, and its owner forgotten since
    await settle()
    assert runs.log == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")] and len(owners) == 0
    for run_id in ("c", "d", "e"):  # pushes "a" out of a memory of three
        owners.submit(start(run_id, key="web:other"))
    assert owners.submit(start("a")) is True


async def test_a_start_seen_again_is_ignored_unless_the_broker_refused_its_runs_output():
    # A run whose output the broker refused (a lost embedded broker) ended unseen: its start, sent
    # again on the new cluster, runs. Any other run's start seen again is a repeat and is dropped.
    attempts: list[str] = []

    async def run(s: StartRun, control: RunControl) -> None:
        attempts.append(s.run_id)
        if s.run_id == "held" and attempts.count("held") == 1:
            raise OutputHeld("kafka not answering (NodeNotReadyError)")
        if s.run_id == "bug":
            raise RuntimeError("bug")

    owners = Conversations(run)
    for run_id in ("held", "bug", "done"):
        assert owners.submit(start(run_id, key=f"web:{run_id}"))
    await settle()
    assert owners.submit(start("held", key="web:held"))  # runs again
    assert not owners.submit(start("bug", key="web:bug"))
    assert not owners.submit(start("done", key="web:done"))
    await settle()
    assert sorted(attempts) == ["bug", "done", "held", "held"]
    await owners.close()
