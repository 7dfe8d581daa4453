"""The run pipeline, top to bottom.

permission → options merge → connector (roles, overrides) → history → run.started
→ Create hook → LLM → tool calls (retries) → Next hook | tool loop | standard
response → exactly one run.finished, with usage summed over every LLM call of the
run (retries, loop turns and delegated children included).

`resume` starts a run from a saved memory and usage instead of history + input
(the seam for resuming a checkpointed run).

Permission: who may start a run. Today the inbound user is the identity.

Heartbeats: `run.heartbeat` every `heartbeat_s` while a run is alive, so the persistence
watchdog can tell a slow run from a lost one. A timer, not a sleeping task: leaving the
block cancels the timer without yielding to the event loop, so the run's next events (its
ending) are handed to the producer in the same tick as its last ones and share their
produce request. Only a beat already being emitted is waited for, so no heartbeat can
follow the run's `run.finished`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TypeGuard

from agentstream.contracts import (
    ApprovalRequest,
    ChatMessage,
    Notice,
    NoticeLevel,
    RunFinished,
    RunHeartbeat,
    RunStarted,
    StartRun,
    Usage,
    User,
)
from agentstream_runner.assistants import system_messages
from agentstream_runner.context import RunContext
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.flow import execute
from agentstream_runner.outcome import RunFailure, RunOutcome
from agentstream_runner.run_setup import history_and_input, role_overrides
from agentstream_runner.scope import RootTotals, RunScope

NOT_AUTHORIZED = "not authorized"


def is_authorized(user: User | None) -> TypeGuard[User]:
    return user is not None and bool(user.id.strip())


def _retrieve(task: asyncio.Task[object]) -> None:
    # A failed beat is not the run's failure: the next emit reports a refused record.
    if not task.cancelled():
        task.exception()


@contextlib.asynccontextmanager
async def heartbeat(events: RunEmitter, interval_s: float) -> AsyncIterator[None]:
    loop = asyncio.get_running_loop()
    beating: asyncio.Task[object] | None = None
    timer: asyncio.TimerHandle | None = None

    def beat() -> None:
        nonlocal beating, timer
        beating = asyncio.create_task(events.emit(RunHeartbeat), name=f"heartbeat:{events.run_id}")
        beating.add_done_callback(_retrieve)
        timer = loop.call_later(interval_s, beat)

    timer = loop.call_later(interval_s, beat)
    try:
        yield
    finally:
        timer.cancel()
        if beating is not None and not beating.done():
            await asyncio.wait({beating})


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run continues: its memory so far and the usage already spent."""

    memory: list[ChatMessage]
    usage: Usage = field(default_factory=Usage)
    first_seq: int | None = None
    approval: ApprovalRequest | None = None  # paused at tool calls awaiting approval: wait again


async def run_pipeline(ctx: RunContext, start: StartRun, resume: ResumePoint | None = None) -> None:
    """Run one root run. Every authorized run ends with exactly one `run.finished`.

    An interrupt (cancellation) ends the run `interrupted` and is not re-raised;
    an unexpected exception ends it `failed` and is re-raised after `run.finished`.
    """
    events = RunEmitter.for_start(start, ctx.ports.publish_event, epoch=ctx.epoch)
    if resume is not None and resume.first_seq is not None:
        events = RunEmitter(
            ctx.ports.publish_event,
            run_id=start.run_id,
            conversation_key=start.conversation_key,
            epoch=ctx.epoch,
            first_seq=resume.first_seq,
        )

    # 1. Permission: without an identity the user gets a notice and nothing else.
    if not is_authorized(start.user):
        await events.emit(Notice, level=NoticeLevel.ERROR, text=NOT_AUTHORIZED, reply_target=start.reply_target)
        await events.confirm()
        return

    outcome = RunOutcome(started_at=ctx.clock())
    totals = RootTotals(usage=resume.usage if resume else Usage())
    try:
        # 2. Who answers, with which options (the caller's win), through which connector.
        assistant = ctx.assistants.get(start.assistant_id)
        options = start.options.over(assistant.options)
        # 3. Memory: system prompts, history, the new input (or the resumed memory). The role
        # overrides and the history are independent reads, on the way to the model request:
        # read together, one database wait instead of two (each tolerates its own failure).
        if resume is None:
            overrides, (history, new_input) = await asyncio.gather(
                role_overrides(ctx, start), history_and_input(ctx, start, options, assistant)
            )
            memory = [*system_messages(assistant, start, start.metadata), *history, *new_input]
        else:
            overrides = await role_overrides(ctx, start)
            new_input, memory = [], list(resume.memory)
        connector = ctx.connectors.resolve(start.options.connector, assistant.connector, overrides)
        ctx.control.started = await events.emit(
            RunStarted,
            assistant_id=assistant.id,
            connector_id=connector.id,
            reply_target=start.reply_target,
            input=new_input,
            user_id=start.user.id if start.user else None,
            session_id=start.session_id,
            tenant_id=start.user.tenant_id if start.user else None,
            store_history=not options.skips_history,
            arrival=start.arrival if resume is None else None,  # a resumed run's message came long ago
        )

        # 4. Create hook → model → tools → the one ending (hooks, loop, delegation).
        scope = RunScope(
            ctx=ctx,
            start=start,
            events=events,
            totals=totals,
            assistant=assistant,
            hooks=ctx.assistants.hooks(assistant.id),
            connector=connector,
            overrides=overrides,
            memory=memory,
            options=options.as_dict(),
            metadata=dict(start.metadata),
            tool_names=list(assistant.tools),
            chain=(assistant.id,),
            resumed_approval=resume.approval if resume else None,
        )
        # Heartbeats while the run is alive: persistence's watchdog tells slow from lost.
        async with heartbeat(events, ctx.runner.heartbeat_s):
            answer = await execute(scope)
        outcome.set_answer(answer.text, answer.data)
        outcome.complete()
    except asyncio.CancelledError:
        # An interrupt is a normal ending: recorded, not re-raised into the owner.
        # uncancel() keeps asyncio.timeout() working for the rest of this task.
        if (task := asyncio.current_task()) is not None:
            task.uncancel()
        outcome.stop(ctx.control.stop_reason)
    except RunFailure as err:
        outcome.fail(str(err))
    except Exception as err:
        outcome.fail(f"internal error: {type(err).__name__}: {err}")
        raise  # after run.finished below; the owner logs the traceback and keeps serving
    finally:
        # 5. Exactly one ending, however the run got here, with the usage of every LLM call.
        outcome.usage = totals.usage
        await events.emit(RunFinished, **outcome.finished_fields(ctx.clock()))
        await events.confirm()  # the run is over when its events are stored
