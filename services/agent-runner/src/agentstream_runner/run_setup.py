"""The reads a root run does before it starts, each tolerant of a missing database.

Role overrides and history come from the runner's own DB session; when a read
fails the run goes on (no overrides / no history) and a warning is logged.
"""

from __future__ import annotations

import structlog

from agentstream.contracts import ChatMessage, MessageRole, RunOptions, StartRun
from agentstream_runner.assistants import Assistant
from agentstream_runner.connectors.resolve import RoleOverrides
from agentstream_runner.context import RunContext
from agentstream_runner.history import drop_overlap, history_size, replay

log = structlog.get_logger(__name__)


def input_messages(start: StartRun) -> list[ChatMessage]:
    """The request's messages: `options.messages` when a client sends a conversation, else the text."""
    if start.options.messages:
        return list(start.options.messages)
    name = start.user.name if start.user else None
    return [ChatMessage(role=MessageRole.USER, content=start.text, name=name)]


async def role_overrides(ctx: RunContext, start: StartRun) -> RoleOverrides:
    if ctx.roles is None or start.user is None:
        return RoleOverrides()
    try:
        return await ctx.roles.overrides(start.user.id, start.user.team_id)
    except Exception as err:  # a broken DB must not stop runs: the system roles still apply
        log.warning("role overrides not loaded", run_id=start.run_id, error=f"{type(err).__name__}: {err}")
        return RoleOverrides()


async def load_history(
    ctx: RunContext, start: StartRun, options: RunOptions, assistant: Assistant
) -> list[ChatMessage]:
    if ctx.history is None or options.skips_history:
        return []
    size = history_size(options, assistant.history_size)
    try:
        rows = await ctx.history.recent(start.conversation_key, start.session_id, size)
    except Exception as err:  # history is a nicety: the run continues without it
        log.warning("history not loaded", run_id=start.run_id, error=f"{type(err).__name__}: {err}")
        return []
    return replay(rows)


async def history_and_input(
    ctx: RunContext, start: StartRun, options: RunOptions, assistant: Assistant
) -> tuple[list[ChatMessage], list[ChatMessage]]:
    """(history, new input): input messages already at the end of history are dropped."""
    history = await load_history(ctx, start, options, assistant)
    return history, drop_overlap(history, input_messages(start))
