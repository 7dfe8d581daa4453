"""`RunLauncher`: what a conversation's owner runs — a new run, a resumed one, or the
ending of a run that never ran (refused, merged, dropped) — and each message's
double-texting policy.

The pipeline itself does not change for a resume: it gets a `ResumePoint` (memory,
usage so far, the seq to continue after) built from the checkpoint. Without a database
(`sessions` None) runs go without history, sessions or role overrides.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, assert_never

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.bounded import RecentIds
from agentstream.contracts import (
    AnswerApproval,
    ChatMessage,
    DoubleTexting,
    FinishReason,
    Notice,
    NoticeLevel,
    ResumeRun,
    RunFinished,
    RunStarted,
    RunStatus,
    StartRun,
    new_id,
)
from agentstream.db.session import autocommitting
from agentstream.observability import record_log_context
from agentstream_runner.approvals import ApprovalWaiters
from agentstream_runner.assistants import Assistants, UnknownAssistant, system_messages
from agentstream_runner.chat_sessions import KnownSessions, SessionStore
from agentstream_runner.context import RunContext, RunControl
from agentstream_runner.conversations.owner import Dismissal, Work
from agentstream_runner.conversations.taken import KNOWN as TAKEN_KNOWN
from agentstream_runner.conversations.taken import TakenRuns
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.history import HistoryStore, history_size
from agentstream_runner.pipeline import ResumePoint, run_pipeline
from agentstream_runner.resume import (
    Checkpoint,
    ResumeVerdict,
    callable_memory,
    load_checkpoint,
    paused_at_approval,
    resume_verdict,
    run_stored,
    saved_input,
    start_of,
)
from agentstream_runner.run_setup import load_history
from agentstream_runner.stores import EarlyHistory, NoHistory, RoleCache, SqlStores

RESUME_IGNORED = {
    ResumeVerdict.NO_CHECKPOINT: "no checkpoint (completed, or unknown run)",
    ResumeVerdict.BEHIND: "a resume begun since went past its checkpoint (ended runner_lost; resumed from that ending)",
    ResumeVerdict.REPEAT: "resumed from that checkpoint here already",
}


def policy_of(assistants: Assistants, start: StartRun) -> DoubleTexting:
    """The request's `double_texting` option, else the assistant's, else enqueue."""
    if start.options.double_texting is not None:
        return start.options.double_texting
    try:
        return assistants.get(start.assistant_id).double_texting
    except UnknownAssistant:  # it fails in its run; here it just waits its turn
        return DoubleTexting.ENQUEUE


class RunLauncher:
    def __init__(
        self,
        shared: RunContext,
        sessions: async_sessionmaker[AsyncSession] | None,
        log: structlog.stdlib.BoundLogger,
    ) -> None:
        """`shared`: what every run gets (ports, connectors, assistants, settings, the live tool
        catalogue, the approval waiters, tracing); each run gets a copy with its own control,
        history and role overrides, read through `sessions`."""
        self._shared = shared
        self._sessions = sessions
        self._readers = autocommitting(sessions) if sessions is not None else None
        self._log = log
        self.known_sessions = KnownSessions()
        self.taken_runs = TakenRuns()  # filled by the service's assignment scan
        self._resumed_from: RecentIds[tuple[str, int]] = RecentIds(TAKEN_KNOWN)  # checkpoints resumed from here
        self._roles = RoleCache()

    @property
    def approvals(self) -> ApprovalWaiters:
        """Where the runs paused for a tool approval wait for answers."""
        return self._shared.approvals

    def policy_for(self, start: StartRun) -> DoubleTexting:
        return policy_of(self._shared.assistants, start)

    def _context(self, control: RunControl, history: HistoryStore | None = None) -> RunContext:
        stores = SqlStores(self._readers) if self._readers is not None else None
        roles = self._roles.over(stores) if stores is not None else None
        return replace(self._shared, control=control, history=history or stores, roles=roles)

    async def run(self, work: Work, control: RunControl) -> None:
        # The run's span continues the trace of the record that asked for it (kept by the service).
        with (
            record_log_context(None, work),
            self._shared.tracing.continuing(work.run_id, "run", {"agentstream.run_id": work.run_id}),
        ):
            await self._run(work, control)
            self._log.info("run handled", command=work.type)  # the context names the run

    async def _run(self, work: Work, control: RunControl) -> None:
        match work:
            case ResumeRun():
                await self.resume(work, control)
            case StartRun():
                # Whether it ran before, and what it reads on its way to the model, read at once.
                ran, (start, history) = await asyncio.gather(self._ran_before(work), self._prepared(work))
                if ran:
                    if isinstance(history, EarlyHistory):
                        history.discard()
                    control.not_started = True  # a ResumeRun held meanwhile by the owner runs next
                    return
                await run_pipeline(self._context(control, history), start)
            case _:
                assert_never(work)

    async def _ran_before(self, start: StartRun) -> bool:
        """A StartRun read again after its runner died inside the commit window: its run was taken up
        (the assignment's scan saw its events) or has ended and been stored. It starts nothing
        (docs/decisions.md § Orphaned runs): the run, ended `runner_lost`, continues from its
        checkpoint through a ResumeRun."""
        if await self.taken_runs.taken(start.run_id):
            self._log.warning("start ignored: another runner took the run up", run_id=start.run_id)
            return True
        if self._sessions is None:
            return False
        try:
            stored = await run_stored(self._readers or self._sessions, start.run_id)
        except Exception as err:  # not known to have run: it runs, as before this check
            self._log.warning("start not checked against stored runs", run_id=start.run_id, error=repr(err))
            return False
        if stored:
            self._log.warning("start ignored: the run already ran (stored)", run_id=start.run_id)
        return stored

    async def _prepared(self, start: StartRun) -> tuple[StartRun, HistoryStore | None]:
        """`start` with its session, and its history and role overrides being read already (the
        run asks for them; None: the run reads as it would). A session no run took yet has no
        history to read (chat_sessions.KnownSessions)."""
        if self._readers is None:
            return (await self._with_session(start))[0], None
        stores = SqlStores(self._readers)
        if start.user is not None:  # needs no session: read beside it
            self._roles.warm(stores, start.user.id, start.user.team_id)
        start, new_session = await self._with_session(start)
        if new_session:
            return start, NoHistory()
        try:
            assistant = self._shared.assistants.get(start.assistant_id)
        except UnknownAssistant:  # the run fails on it, and reads nothing
            return start, None
        options = start.options.over(assistant.options)
        if options.skips_history:
            return start, None
        size = history_size(options, assistant.history_size)
        return start, EarlyHistory(stores, start.conversation_key, start.session_id, size)

    async def _with_session(self, start: StartRun) -> tuple[StartRun, bool]:
        """`start` with its conversation's session, and whether that session is new (no run took it)."""
        if start.session_id is not None or self._sessions is None:
            return start, False
        try:
            session_id = await self.known_sessions.current(SessionStore(self._sessions), start.conversation_key)
        except Exception as err:  # history by conversation still works without a session
            self._log.warning("session not resolved", run_id=start.run_id, error=repr(err))
            return start, False
        new = self.known_sessions.take_new(session_id)
        return start.model_copy(update={"session_id": session_id}), new

    async def reset_session(self, conversation_key: str) -> str | None:
        """A new history session; None when there is no database to record it in."""
        if self._sessions is None:
            return None
        try:
            return await self.known_sessions.reset(SessionStore(self._sessions), conversation_key)
        except Exception as err:
            self._log.warning("session not reset", conversation=conversation_key, error=repr(err))
            return None

    # -- resume --------------------------------------------------------------------
    async def resume(self, command: ResumeRun, control: RunControl) -> None:
        sessions = self._sessions
        if sessions is None:
            self._log.warning("resume ignored: no database", run_id=command.run_id)
            return
        # A resume begun on a runner that died, and ended by this one's scan: only a checkpoint past it.
        up_to = await self.taken_runs.resumed_up_to(command.run_id)
        checkpoint = await load_checkpoint(sessions, command.run_id, at_least=-1 if up_to is None else up_to)
        verdict = resume_verdict(checkpoint, up_to, self._resumed_from)
        if verdict is not ResumeVerdict.RESUME or checkpoint is None:
            self._log.warning("resume ignored", why=RESUME_IGNORED[verdict], run_id=command.run_id, resumed_up_to=up_to)
            return
        self._resumed_from.add((checkpoint.root_run_id, checkpoint.last_seq))
        start = start_of(command, checkpoint)
        ctx = self._context(control, history=SqlStores(sessions, without_run=command.run_id))
        paused = paused_at_approval(checkpoint.steps)
        point = ResumePoint(
            memory=paused.memory if paused else await self._memory(ctx, start, checkpoint),
            usage=checkpoint.usage,
            first_seq=checkpoint.last_seq + 1,
            approval=paused.request if paused else None,
        )
        self._log.info("resuming run", run_id=command.run_id, steps=len(checkpoint.steps), from_seq=point.first_seq)
        await run_pipeline(ctx, start, point)

    async def _memory(self, ctx: RunContext, start: StartRun, checkpoint: Checkpoint) -> list[ChatMessage]:
        memory = callable_memory(checkpoint.steps)
        if memory is not None:
            return memory
        # Nothing usable was saved: the memory the run began with.
        assistant = self._shared.assistants.get(start.assistant_id)
        options = start.options.over(assistant.options)
        history = await load_history(ctx, start, options, assistant)
        return [*system_messages(assistant, start, start.metadata), *history, *saved_input(checkpoint, start)]

    async def republish_started(self, started: list[RunStarted]) -> None:
        """The runs in flight here go on after a restarted embedded broker lost every record, but
        delivery, reading the new cluster, never saw them start and would drop their answers: their
        `run.started` again, as it was (same id and seq: delivery opens the stream it would have, and
        numbers its messages as before; persistence has that seq already, or takes the start anew).
        Events a run published on the new cluster before this are lost to the stream's preview only:
        its final carries the whole text (docs/decisions.md "Broker loss")."""
        acks: dict[str, asyncio.Future[Any]] = {}
        refused: list[str] = []
        for event in started:
            try:
                if (ack := await self._shared.ports.publish_event(event)) is not None:
                    acks[event.root_run_id] = ack
            except Exception as err:  # that run's answer goes unshown, as before; the others still go
                self._log.warning("run.started not published again", run_id=event.root_run_id, error=repr(err))
                refused.append(event.root_run_id)
        if acks:
            await asyncio.wait(acks.values())
        refused += [run_id for run_id, ack in acks.items() if ack.cancelled() or ack.exception() is not None]
        if started:
            self._log.warning(
                "runs in flight: run.started published again on the new cluster",
                runs=[s.root_run_id for s in started],
                refused=refused,
            )

    async def no_pending_approval(self, answer: AnswerApproval) -> None:
        """Tell the chat an `/approve` or `/deny` found nothing to answer (a notice of no run)."""
        run_id = new_id()
        await self._shared.ports.publish_event(
            Notice(
                run_id=run_id,
                root_run_id=run_id,
                conversation_key=answer.conversation_key,
                seq=0,
                level=NoticeLevel.INFO,
                text=self._shared.runner.texts_for(answer.reply_target.platform).no_pending_approval,
                reply_target=answer.reply_target,
                command=answer.decision.value,
            )
        )

    # -- runs that never ran ---------------------------------------------------------
    async def dismiss(self, start: StartRun, why: Dismissal, detail: str) -> None:
        """Their `run.queued` opened a stream: close it, so delivery and persistence end it."""
        with record_log_context(None, start):
            await self._dismiss(start, why, detail)

    async def _dismiss(self, start: StartRun, why: Dismissal, detail: str) -> None:
        events = RunEmitter.for_start(start, self._shared.ports.publish_event)
        match why:
            case Dismissal.REJECTED:
                busy = self._shared.runner.texts_for(start.reply_target.platform).busy
                await events.emit(Notice, level=NoticeLevel.WARNING, text=busy, reply_target=start.reply_target)
                await events.emit(RunFinished, status=RunStatus.FAILED, reason=FinishReason.REJECTED, error=detail)
            case Dismissal.MERGED:
                # Its text runs inside run `detail` and is stored there.
                await events.emit(RunFinished, status=RunStatus.COMPLETED, reason=FinishReason.MERGED, error=None)
            case Dismissal.DROPPED:
                reason = FinishReason(detail)
                status = RunStatus.FAILED if reason is FinishReason.REBALANCED else RunStatus.INTERRUPTED
                await events.emit(RunFinished, status=status, reason=reason, error=f"not started: {detail}")
            case _:
                assert_never(why)
        await events.confirm()
