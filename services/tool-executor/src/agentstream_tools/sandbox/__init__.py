"""The workspace tools (`shell`, `python`, `read_file`, `write_file`), off unless
`tools.sandbox.enabled`. Each conversation has its own directory; docs/tools.md says what the
sandbox guarantees, how that is tested and what it does not protect against."""

from __future__ import annotations

from typing import Any

from agentstream.config.tools import SandboxSettings
from agentstream.observability import get_logger
from agentstream.tools_catalog import PYTHON, READ_FILE, SHELL, WRITE_FILE
from agentstream_tools.call_context import current_call
from agentstream_tools.registry import Tool
from agentstream_tools.sandbox.commands import TIMEOUT_MARGIN_S, CommandRunner
from agentstream_tools.sandbox.isolation import LOGGER, Isolation, SandboxUnavailable, admit, interpreter_outside, probe
from agentstream_tools.sandbox.workspace import Workspaces


def _conversation() -> str:
    call = current_call.get()
    if call is None:  # only the executor runs tools, and it always sets the call
        raise RuntimeError("workspace tool run outside a tool call")
    return call.conversation_key


def workspace_tools(settings: SandboxSettings, isolation: Isolation | None = None) -> list[Tool]:
    """None unless enabled; raises SandboxUnavailable where the host cannot isolate commands and
    `allow_weak_isolation` is off. `isolation` replaces the host's probe (tests)."""
    if not settings.enabled:
        return []
    isolation = isolation if isolation is not None else probe(settings)
    if weaknesses := admit(isolation, settings):
        get_logger(LOGGER).warning(  # fresh: a module-level logger is cached at first use
            "workspace sandbox: WEAK ISOLATION accepted by tools.sandbox.allow_weak_isolation", weaknesses=weaknesses
        )
    if isolation.namespaces and (why := interpreter_outside(settings)):
        raise SandboxUnavailable(why)
    workspaces = Workspaces(settings)
    runner = CommandRunner(settings, isolation)
    timeout_s = settings.wall_timeout_s + 2 * TIMEOUT_MARGIN_S  # the command's own timeout ends it first

    async def shell(args: dict[str, Any]) -> str:
        return await runner.run(workspaces.path(_conversation()), ["sh", "-c", args["command"]])

    async def python(args: dict[str, Any]) -> str:
        return await runner.run(workspaces.path(_conversation()), [settings.python, "-I", "-c", args["code"]])

    async def read_file(args: dict[str, Any]) -> str:
        return workspaces.read(_conversation(), args["path"])

    async def write_file(args: dict[str, Any]) -> str:
        return workspaces.write(_conversation(), args["path"], args["content"])

    return [
        Tool.from_spec(SHELL, shell, timeout_s=timeout_s),
        Tool.from_spec(PYTHON, python, timeout_s=timeout_s),
        Tool.from_spec(READ_FILE, read_file),
        Tool.from_spec(WRITE_FILE, write_file),
    ]
