"""The run pipeline, top to bottom (ARCHITECTURE §3).

permission → assistant and connector → run.started → LLM turn → tool calls →
back to the model (at most `max_turns` LLM calls) → exactly one run.finished.

Later issues slot in here, in this order: options merge, history, hooks, request
build/retrieval, tool retries, delegation and resume.
"""

from __future__ import annotations

import asyncio
import itertools

from agentstream.contracts import ChatMessage, Notice, RunFinished, RunStarted, SegmentBreak, StartRun
from agentstream_runner.assistants import Assistant
from agentstream_runner.context import RunContext
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.errors import RunFailure
from agentstream_runner.llm_step import llm_turn
from agentstream_runner.outcome import RunOutcome
from agentstream_runner.permission import NOT_AUTHORIZED, is_authorized
from agentstream_runner.tool_step import tool_round


def _requested_connector(start: StartRun) -> str | None:
    value = start.options.get("connector")
    return value if isinstance(value, str) and value else None


def _system_messages(assistant: Assistant) -> list[ChatMessage]:
    return [ChatMessage(role="system", content=assistant.system_prompt)] if assistant.system_prompt else []


async def run_pipeline(ctx: RunContext, start: StartRun) -> None:
    """Run one root run. Every authorized run ends with exactly one `run.finished`.

    An interrupt (cancellation) ends the run `interrupted` and is not re-raised;
    an unexpected exception ends it `failed` and is re-raised after `run.finished`.
    """
    events = RunEmitter.for_start(start, ctx.ports.publish_event, epoch=ctx.epoch)

    # 1. Permission: without an identity the user gets a notice and nothing else.
    if not is_authorized(start.user):
        await events.emit(Notice, level="error", text=NOT_AUTHORIZED, reply_target=start.reply_target)
        return

    outcome = RunOutcome(started_at=ctx.clock())
    try:
        # 2. Who answers, through which connector (the request's option wins).
        assistant = ctx.assistants.get(start.assistant_id)
        connector = ctx.connectors.resolve(_requested_connector(start), assistant.connector)

        # 3. The run starts. Memory: the system prompt and the new user message.
        user_message = ChatMessage(role="user", content=start.text, name=start.user.name)
        memory = [*_system_messages(assistant), user_message]
        await events.emit(
            RunStarted, assistant_id=assistant.id, connector_id=connector.id, reply_target=start.reply_target,
            input=[user_message], user_id=start.user.id, session_id=start.session_id,
        )

        # 4. The tool loop: results go back to the model until it answers without tools.
        for turn in itertools.count(1):
            completion = await llm_turn(events, connector, assistant, memory, turn, ctx.runner.coalesce_ms / 1000)
            outcome.add_usage(completion.usage)
            outcome.set_answer(completion.text)
            if not completion.tool_calls:
                break
            if turn >= assistant.max_turns:
                raise RunFailure(f"stopped after {turn} model calls: the model kept calling tools")
            await tool_round(events, ctx.ports, ctx.runner, start, completion.tool_calls, memory, turn)
            await events.emit(SegmentBreak, reason="tool")
        outcome.complete()
    except asyncio.CancelledError:
        # An interrupt is a normal ending: recorded, not re-raised into the owner.
        # uncancel() keeps asyncio.timeout() working for the rest of this task.
        if (task := asyncio.current_task()) is not None:
            task.uncancel()
        outcome.interrupt(ctx.control.stop_reason)
    except RunFailure as err:
        outcome.fail(str(err))
    except Exception as err:
        outcome.fail(f"internal error: {type(err).__name__}: {err}")
        raise  # after run.finished below; the owner logs the traceback and keeps serving
    finally:
        # 5. Exactly one ending, however the run got here.
        await events.emit(RunFinished, **outcome.finished_fields(ctx.clock()))
