"""Which runs of newly assigned partitions have no runner (docs/decisions.md § Orphaned runs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agentstream import contracts as ev
from agentstream.contracts import ReplyTarget, StepType, utcnow
from agentstream_runner.app import runs_to_run
from agentstream_runner.orphans import (
    lost_ending,
    open_runs,
    orphaned,
    quiet_left,
    resumes_begun,
    runs_kept,
    still_silent,
    taken,
)

KEY = "web:c1"
TARGET = ReplyTarget(platform="web", chat_id="c1")


def base(root: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {"run_id": root, "root_run_id": root, "conversation_key": KEY, "seq": seq, **extra}


def queued(root: str) -> ev.RunQueued:
    return ev.RunQueued(**base(root, 0), assistant_id="default", reply_target=TARGET)


def started(root: str, seq: int = 1, **extra: Any) -> ev.RunStarted:
    return ev.RunStarted(**base(root, seq, **extra), assistant_id="default", connector_id="fake", reply_target=TARGET)


def delta(root: str, seq: int, text: str, message_id: str = "m1") -> ev.MessageDelta:
    return ev.MessageDelta(**base(root, seq), message_id=message_id, text=text)


def finished(root: str, seq: int) -> ev.RunFinished:
    return ev.RunFinished(**base(root, seq), status=ev.RunStatus.COMPLETED, text="done")


def llm_step(root: str, seq: int, calls: int) -> ev.StepCompleted:
    usage = {"prompt_tokens": 10 * calls, "completion_tokens": 2 * calls, "llm_calls": calls}
    return ev.StepCompleted(**base(root, seq), step_id=f"s{seq}", step_type=StepType.LLM, output={"usage": usage})


def test_a_run_started_and_not_finished_is_orphaned() -> None:
    [run] = open_runs([queued("r1"), started("r1"), delta("r1", 2, "Hel"), delta("r1", 3, "lo")])
    assert (run.root_run_id, run.conversation_key, run.max_seq) == ("r1", KEY, 3)


def test_a_finished_run_is_not() -> None:
    assert open_runs([queued("r1"), started("r1"), delta("r1", 2, "x"), finished("r1", 3)]) == []


def test_a_queued_run_that_never_started_is_not() -> None:
    # Its StartRun is still on `runs`: the partition's new owner starts it.
    assert open_runs([queued("r1"), queued("r2"), started("r2"), finished("r2", 2)]) == []


def test_a_refused_run_is_not() -> None:
    notice = ev.Notice(**base("r1", 1), text="who are you?")
    assert open_runs([queued("r1"), notice]) == []


def test_tool_heartbeats_of_a_run_that_ended_before_the_read_open_nothing() -> None:
    beat = ev.ToolHeartbeat(**base("r1", 4), call_id="c1", tool="slow")
    assert open_runs([beat, beat]) == []


def test_a_run_resumed_after_its_ending_is_open_again_and_re_reads_do_not_reopen_it() -> None:
    events = [started("r1"), delta("r1", 2, "x"), finished("r1", 3), delta("r1", 2, "x"), delta("r1", 4, "more")]
    [run] = open_runs(events)
    assert (run.max_seq, run.partial) == (4, {"m1": "more"})


def test_a_replay_is_not_resumed() -> None:
    assert open_runs([started("r1", replay_of="r0"), delta("r1", 2, "x")]) == []


def test_child_run_endings_do_not_end_the_root() -> None:
    child_end = ev.RunFinished(
        run_id="child", root_run_id="r1", conversation_key=KEY, seq=3, status=ev.RunStatus.COMPLETED
    )
    [run] = open_runs([started("r1"), delta("r1", 2, "x"), child_end])
    assert run.max_seq == 3


def test_the_ending_is_runner_lost_after_the_last_seq_with_the_usage_and_text_so_far() -> None:
    completed = ev.MessageCompleted(**base("r1", 3), message_id="m0", text="first answer")
    events = [started("r1", epoch=2), llm_step("r1", 2, 1), completed, delta("r1", 4, "par"), delta("r1", 5, "tial")]
    [run] = open_runs(events)
    ending = lost_ending(run, now=run.started_at + timedelta(seconds=3))
    assert (ending.status, ending.reason, ending.seq, ending.epoch) == ("failed", "runner_lost", 6, 2)
    assert (ending.run_id, ending.root_run_id, ending.conversation_key) == ("r1", "r1", KEY)
    assert ending.usage.llm_calls == 1 and ending.usage.prompt_tokens == 10
    assert ending.text == "partial"
    assert ending.duration_ms == 3000.0


def test_with_no_partial_message_the_ending_text_is_the_last_completed_one() -> None:
    completed = ev.MessageCompleted(**base("r1", 2), message_id="m0", text="all of it")
    [run] = open_runs([started("r1"), completed])
    assert lost_ending(run, now=utcnow()).text == "all of it"


def test_runs_of_several_conversations_are_told_apart() -> None:
    events = [started("r1"), started("r2"), finished("r1", 2), delta("r2", 2, "x"), started("r3")]
    assert sorted(r.root_run_id for r in open_runs(events)) == ["r2", "r3"]


def test_a_run_told_still_to_run_is_not_orphaned() -> None:
    # Its ResumeRun is read again by the new owner (which resumes it), or this runner runs it.
    events = [started("r1"), delta("r1", 2, "x"), started("r2"), delta("r2", 2, "y")]
    assert [r.root_run_id for r in orphaned(events, {"r1"})] == ["r2"]


def test_runs_taken_up_are_those_with_any_event_past_run_queued() -> None:
    # A StartRun read again after its runner died inside the commit window: started (open or ended),
    # or refused with a notice, it starts nothing again; only queued, it is still to start.
    notice = ev.Notice(**base("r3", 1), text="who are you?")
    events = [queued("r1"), started("r1"), delta("r1", 2, "x"), queued("r2"), started("r2"), finished("r2", 2)]
    events += [queued("r3"), notice, queued("r4")]
    assert taken(events) == {"r1", "r2", "r3"}


def test_the_runs_the_runs_records_start_or_resume() -> None:
    start = ev.StartRun(run_id="r1", conversation_key=KEY, assistant_id="default", text="hi", reply_target=TARGET)
    resume = ev.ResumeRun(run_id="r2", conversation_key=KEY)
    interrupt = ev.InterruptRun(run_id="r3", conversation_key=KEY)
    values = [start.to_json(), resume.to_json(), interrupt.to_json(), b"not json"]
    assert runs_to_run(values) == ({"r1"}, {"r2"})


def lost(root: str, seq: int) -> ev.RunFinished:
    return ev.RunFinished(**base(root, seq), status=ev.RunStatus.FAILED, reason=ev.FinishReason.RUNNER_LOST)


def test_a_resume_read_again_had_begun_when_its_run_is_open_again_after_its_ending() -> None:
    # r1: ended runner_lost at 4, resumed from 5 by a runner that died: the resume is open, its next seq 7.
    # r2: ended, its ResumeRun read again, not begun. r3: resumed, not read again (committed). r4: only
    # the resume's events (persistence committed past the ending): begun all the same.
    events = [started("r1"), delta("r1", 2, "x"), llm_step("r1", 3, 1), lost("r1", 4)]
    events += [started("r1", 5), delta("r1", 6, "y"), started("r2"), lost("r2", 2)]
    events += [started("r3"), lost("r3", 2), started("r3", 3), started("r4", 9), delta("r4", 10, "z")]
    assert resumes_begun(events, {"r1", "r2", "r4", "r5"}) == {"r1": 7, "r4": 11}
    # The app leaves the begun ones out of what is still to run: they are ended like any orphan, with
    # the seq the resume must go past.
    ended = {r.root_run_id: lost_ending(r).seq for r in orphaned(events, {"r2", "r3"})}
    assert ended == {"r1": 7, "r4": 11}


def test_a_resume_read_again_whose_resume_ended_had_not_begun_here() -> None:
    # Resumed and ended again (the watchdog): nothing is open; the checkpoint is past that ending.
    events = [started("r1"), lost("r1", 2), started("r1", 3), delta("r1", 4, "y"), lost("r1", 5)]
    assert resumes_begun(events, {"r1"}) == {}


def test_an_open_run_remembers_when_it_was_last_written_to_but_not_by_tool_heartbeats() -> None:
    t0 = utcnow()
    first = started("r1").model_copy(update={"ts": t0})
    later = delta("r1", 2, "a").model_copy(update={"ts": t0 + timedelta(seconds=3)})
    beat = ev.ToolHeartbeat(**base("r1", 2), call_id="c1", tool="calculator", ts=t0 + timedelta(seconds=9))
    [run] = open_runs([first, later, beat])
    assert (run.started_at, run.last_at) == (t0, t0 + timedelta(seconds=3))


def test_a_run_is_judged_once_quiet_for_two_heartbeats() -> None:
    t0 = utcnow()
    [run] = open_runs([started("r1").model_copy(update={"ts": t0})])
    assert quiet_left(run, t0 + timedelta(seconds=1), heartbeat_s=5) == 9
    assert quiet_left(run, t0 + timedelta(seconds=10), heartbeat_s=5) == 0
    assert quiet_left(run, t0 + timedelta(seconds=60), heartbeat_s=5) == 0


def test_only_runs_that_wrote_nothing_since_and_are_still_open_are_silent() -> None:
    before = open_runs([started("quiet"), started("writing"), started("ended")])
    after = open_runs(
        [started("quiet"), started("writing"), delta("writing", 2, "x"), started("ended"), finished("ended", 2)]
    )
    assert [run.root_run_id for run in still_silent(before, after)] == ["quiet"]
    # a run gone from the later read (persistence committed past its ending) is not silent either
    assert still_silent(before, []) == []


def test_a_run_started_here_is_kept_even_when_its_start_is_read_again_and_found_taken() -> None:
    # "held" runs here (its run.started published again on a restarted broker's new cluster, and
    # ingress sent its StartRun again); "waiting" was read again and waits on the scan, not started;
    # "resumed" had its resume begun elsewhere; "plain" just runs here.
    active = {"held", "waiting", "resumed", "plain"}
    kept = runs_kept(active, started_here={"held", "plain"}, taken_again={"held", "waiting"}, resumes_ended={"resumed"})
    assert kept == {"held", "plain"}
