"""Runs left without a runner, pure: which runs of newly assigned `runs` partitions nobody runs.

When this runner is assigned `runs` partitions, no run of their conversations runs anywhere:
a runner that gave them up finished or ended its runs first (handover.py, before the partitions
moved), and a runner that died runs nothing. So every run whose `events` (co-partitioned with
`runs`) show it started and not finished, up to the partitions' end when they were assigned, is
orphaned — docs/decisions.md § Orphaned runs. The runner ends each `failed(runner_lost)` at once,
as persistence's watchdog would after `resume.stale_after_s`, and `resume.auto` continues it from
its checkpoint. A run only queued is not orphaned: its StartRun is still on `runs` for the new owner;
nor is one whose ResumeRun the new owner reads again (`orphaned`). A StartRun read again (a runner
died inside its group's auto-commit window) starts nothing when the stream shows its run already
taken up (`taken`): the run is orphaned like any other and continues from its checkpoint, not from
scratch. A ResumeRun read again whose resume had begun (`resumes_begun`: the run is open again after
its ending) is no reason to leave that resume open: it is ended too, and the ResumeRun continues the
run only from a checkpoint past it — docs/decisions.md § Orphaned runs.

"Nobody runs it" is checked, not assumed, for a run written to lately: a broker may complete a
rebalance before a member has let go of its partitions (the embedded Tansu answers a JoinGroup within
half the session timeout, whoever has not rejoined yet), and a run still going on elsewhere would be
ended `runner_lost` while it streams its answer. A live run writes at least every `runner.heartbeat_s`;
a run whose newest event is younger than `QUIET_HEARTBEATS` of them is judged only once that much
quiet has passed (`quiet_left`), and is orphaned only if it wrote nothing meanwhile (`still_silent`).
A dead runner's runs are found by the group after its session timeout (10 s), by then that quiet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from pydantic import ValidationError

from agentstream import contracts as ev
from agentstream.contracts import RunFinished, StepType, Usage, utcnow
from agentstream.contracts.steps import LlmStepOutput

LOST_ERROR = "the agent runner running it stopped (its conversations were assigned to another)"
# Heartbeats a run may miss before it is taken for one nobody runs (a loaded process writes late).
QUIET_HEARTBEATS = 2


@dataclass
class OpenRun:
    """What the stream says of a root run that started and has not finished."""

    root_run_id: str
    conversation_key: str
    started_at: datetime
    last_at: datetime  # its newest event's `ts`
    max_seq: int = -1
    epoch: int = 0
    usage: Usage = field(default_factory=Usage)
    text: str = ""
    # Text streamed by a message that never completed, by message id.
    partial: dict[str, str] = field(default_factory=dict)


def open_runs(events: Iterable[ev.RunEvent]) -> list[OpenRun]:
    """The root runs that started in `events` (in log order) and did not finish there. A run
    resumed after an earlier ending counts from its first event after that ending."""
    runs: dict[str, OpenRun] = {}
    finished_at: dict[str, int] = {}  # root run id → seq of its latest run.finished
    replays: set[str] = set()
    for event in events:
        root = event.root_run_id
        if isinstance(event, ev.RunFinished):
            if event.run_id == root:
                runs.pop(root, None)
                finished_at[root] = max(finished_at.get(root, -1), event.seq)
            elif root in runs:
                _apply(runs[root], event)  # a delegated run's ending: its seq is the root's too
            continue
        if isinstance(event, ev.RunQueued) or event.seq <= finished_at.get(root, -1):
            continue  # not started, or a re-read of what came before its ending
        if isinstance(event, ev.RunStarted) and event.replay_of is not None:
            replays.add(root)  # a replay is delivered, never stored: nothing to resume
        run = runs.get(root)
        if run is None:
            if isinstance(event, ev.Notice | ev.ToolHeartbeat):
                continue  # not the runner running it: a refusal, or a tool call outliving its run
            run = runs[root] = OpenRun(root, event.conversation_key, event.ts, event.ts)
        _apply(run, event)
    return [run for root, run in runs.items() if root not in replays]


def taken(events: Iterable[ev.RunEvent]) -> set[str]:
    """The root runs a runner has taken up: any event of theirs but ingress's `run.queued` (started,
    refused, ended). Their StartRun, read again, must not start them afresh: the first model call
    would be paid twice and the events numbered from 1 again, below what the user was shown."""
    return {event.root_run_id for event in events if not isinstance(event, ev.RunQueued)}


def resumes_begun(events: Iterable[ev.RunEvent], read_again: Iterable[str]) -> dict[str, int]:
    """Of the runs whose ResumeRun is read again (`read_again`), those whose resume had begun — open in
    `events`, which are read after those commands, so the ending the ResumeRun followed is among them
    (or before persistence's committed offset, with every event before it): what is open is the
    resume — by the seq their `lost_ending` takes. A ResumeRun of such a run must not continue from
    the checkpoint it was issued for: its next seqs are the resume's."""
    again = set(read_again)
    return {run.root_run_id: lost_ending_seq(run) for run in open_runs(events) if run.root_run_id in again}


def lost_ending_seq(run: OpenRun) -> int:
    return run.max_seq + 1


def orphaned(events: Iterable[ev.RunEvent], still_to_run: Iterable[str]) -> list[OpenRun]:
    """The open runs of `events` that nobody runs: not those in `still_to_run` — a run whose
    ResumeRun is on `runs` past the group's committed offset (read by a runner that died before
    committing it, it is read again by the new owner and resumed again; ending it too would resume
    it twice, unless that resume had begun: `resumes_begun`), or a run this runner runs itself. A
    StartRun read again does not keep its run here: that run was `taken` and its StartRun is ignored."""
    again = set(still_to_run)
    return [run for run in open_runs(events) if run.root_run_id not in again]


def quiet_left(run: OpenRun, now: datetime, heartbeat_s: float) -> float:
    """Seconds until `run` has been quiet for `QUIET_HEARTBEATS` heartbeats (0: it has)."""
    quiet = timedelta(seconds=QUIET_HEARTBEATS * heartbeat_s)
    return max(0.0, (run.last_at + quiet - now).total_seconds())


def still_silent(before: Iterable[OpenRun], after: Iterable[OpenRun]) -> list[OpenRun]:
    """Of the runs open in a first read (`before`), those a later read (`after`) shows open and with no
    event since: ended meanwhile or still writing, a run has a runner."""
    now_open = {run.root_run_id: run for run in after}
    return [
        now_open[run.root_run_id]
        for run in before
        if run.root_run_id in now_open and now_open[run.root_run_id].max_seq == run.max_seq
    ]


def runs_kept(
    active: set[str], started_here: set[str], taken_again: set[str], resumes_ended: Iterable[str]
) -> set[str]:
    """The runs this runner runs itself, which its scan must not end: every active run but one whose
    StartRun was read again and found taken (`taken`) before it started here (it waits on the scan,
    and will start nothing), or whose ResumeRun read again found its resume begun (`resumes_begun`:
    that resume is ended). A run started here stays, even when its StartRun comes again: after a
    restarted embedded broker ingress sends the start of every run not yet ended again, and this
    runner published the run's `run.started` again on the new cluster, so the scan finds it taken."""
    return active - (taken_again - started_here) - set(resumes_ended)


def _apply(run: OpenRun, event: ev.RunEvent) -> None:
    if not isinstance(event, ev.ToolHeartbeat):  # the executor's: a call outliving its runner writes them
        run.last_at = max(run.last_at, event.ts)
    run.max_seq = max(run.max_seq, event.seq)
    run.epoch = max(run.epoch, event.epoch)
    match event:
        case ev.MessageDelta() if event.kind == ev.DeltaKind.TEXT:
            run.partial[event.message_id] = run.partial.get(event.message_id, "") + event.text
        case ev.MessageCompleted():
            run.text = event.text
            run.partial.pop(event.message_id, None)
        case ev.StepCompleted() if event.step_type == StepType.LLM:
            with contextlib.suppress(ValidationError):  # another shape carries no usage to bill
                run.usage = run.usage + LlmStepOutput.model_validate(event.output).usage
        case _:
            pass


def lost_ending(run: OpenRun, now: datetime | None = None) -> RunFinished:
    """The `run.finished` that ends an orphaned run: what persistence's watchdog would publish."""
    now = now or utcnow()
    text = next(reversed(run.partial.values()), None) if run.partial else None
    return RunFinished.runner_lost(
        root_run_id=run.root_run_id,
        conversation_key=run.conversation_key,
        seq=lost_ending_seq(run),
        epoch=run.epoch,
        error=LOST_ERROR,
        text=text if text else run.text,
        usage=run.usage,
        duration_ms=(now - run.started_at).total_seconds() * 1000,
    )
