"""The run pipeline, top to bottom.

permission → options merge → connector (roles, overrides) → history → run.started
→ Create hook → LLM → tool calls (retries) → Next hook | tool loop | standard
response → exactly one run.finished, with usage summed over every LLM call of the
run (retries, loop turns and delegated children included).

`resume` starts a run from a saved memory and usage instead of history + input
(the seam for resuming a checkpointed run).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentstream.contracts import ChatMessage, Notice, NoticeLevel, RunFinished, RunStarted, StartRun, Usage
from agentstream_runner.context import RunContext
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.errors import RunFailure
from agentstream_runner.flow import execute
from agentstream_runner.heartbeat import heartbeat
from agentstream_runner.history import skips_history
from agentstream_runner.outcome import RunOutcome
from agentstream_runner.permission import NOT_AUTHORIZED, is_authorized
from agentstream_runner.prompts import system_messages
from agentstream_runner.run_setup import history_and_input, requested_connector, role_overrides
from agentstream_runner.scope import RootTotals, RunScope


@dataclass(frozen=True)
class ResumePoint:
    """Where a resumed run continues: its memory so far and the usage already spent."""

    memory: list[ChatMessage]
    usage: Usage = field(default_factory=Usage)
    first_seq: int | None = None


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
        options = {**assistant.options, **start.options}
        overrides = await role_overrides(ctx, start)
        connector = ctx.connectors.resolve(requested_connector(start.options), assistant.connector, overrides)

        # 3. Memory: system prompts, history, the new input (or the resumed memory).
        if resume is None:
            history, new_input = await history_and_input(ctx, start, options, assistant)
            memory = [*system_messages(assistant, start, start.metadata), *history, *new_input]
        else:
            new_input, memory = [], list(resume.memory)
        await events.emit(
            RunStarted,
            assistant_id=assistant.id,
            connector_id=connector.id,
            reply_target=start.reply_target,
            input=new_input,
            user_id=start.user.id if start.user else None,
            session_id=start.session_id,
            tenant_id=start.user.tenant_id if start.user else None,
            store_history=not skips_history(options),
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
            options=options,
            metadata=dict(start.metadata),
            tool_names=list(assistant.tools),
            chain=(assistant.id,),
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
