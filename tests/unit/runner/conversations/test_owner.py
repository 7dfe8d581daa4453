import asyncio

from agentstream.config.runner import RunnerSettings
from agentstream.contracts import DoubleTexting, FinishReason, ReplyTarget, ResumeRun, StartRun
from agentstream_runner.context import RunControl
from agentstream_runner.conversations.owner import DEFAULT_COLLECT_WINDOW_S, Conversation, OwnerState
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
