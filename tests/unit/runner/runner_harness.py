"""Runs the real pipeline against the fake OpenAI server (real HTTP) with in-memory
ports: events collected, tool calls executed by the real tool-executor code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from agentstream.config import load_settings
from agentstream.contracts import (
    EventBase,
    ReplyTarget,
    RunFinished,
    RunStarted,
    StartRun,
    ToolCallRequest,
    ToolCallResult,
    User,
)
from agentstream_runner.assistants import Assistant, Assistants
from agentstream_runner.connectors.resolve import Connectors, RoleOverrides
from agentstream_runner.context import RunContext
from agentstream_runner.history import StoredMessage
from agentstream_runner.hooks import Hooks
from agentstream_runner.pipeline import run_pipeline
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_tools.builtin import builtin_tools
from agentstream_tools.executor import execute
from agentstream_tools.registry import ToolRegistry

ToolFn = Callable[[ToolCallRequest], Awaitable[ToolCallResult]]
REGISTRY = ToolRegistry(builtin_tools())


class Ports:
    def __init__(self, tool: ToolFn | None = None) -> None:
        self.events: list[EventBase] = []
        self.tool_requests: list[ToolCallRequest] = []
        self._tool = tool

    async def publish_event(self, event: EventBase) -> None:
        self.events.append(event)

    async def call_tool(self, request: ToolCallRequest) -> ToolCallResult:
        self.tool_requests.append(request)
        if self._tool is not None:
            return await self._tool(request)
        return await execute(REGISTRY, request, 5.0)

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def finished(self) -> RunFinished:
        [finished] = self.of(RunFinished)
        assert self.events[-1] is finished
        seqs = [e.seq for e in self.events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        return finished

    @property
    def started(self) -> RunStarted:
        [started] = self.of(RunStarted)
        return started


class FakeHistory:
    def __init__(self, rows: Iterable[tuple[str, str]] = (), fail: bool = False) -> None:
        self.rows = [StoredMessage(role=r, content=c, name="calculator" if r == "tool" else None) for r, c in rows]
        self.fail = fail
        self.limits: list[int] = []

    async def recent(self, conversation_key: str, session_id: str | None, limit: int) -> list[StoredMessage]:
        self.limits.append(limit)
        if self.fail:
            raise RuntimeError("database is down")
        return self.rows[-limit:] if limit else []


class FakeRoles:
    def __init__(self, user: Mapping[str, str] | None = None, team: Mapping[str, str] | None = None) -> None:
        self.value = RoleOverrides(user=dict(user or {}), team=dict(team or {}))

    async def overrides(self, user_id: str | None, team_id: str | None) -> RoleOverrides:
        return self.value


def openai_connector(fake: FakeOpenAI, connector_id: str = "gpt", **extra: Any) -> dict[str, Any]:
    return {
        "id": connector_id,
        "type": "openai",
        "base_url": fake.base_url,
        "model": "fake-model",
        "retry_base_delay_s": 0,
        **extra,
    }


def start_run(
    text: str = "hi",
    assistant_id: str = "default",
    options: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> StartRun:
    return StartRun(
        run_id="run-1",
        conversation_key="web:c1",
        assistant_id=assistant_id,
        user=User(id="u1", name="Ann", team_id="t1"),
        text=text,
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
        options=options or {},
        metadata=metadata or {},
    )


def assistant(assistant_id: str = "helper", **fields: Any) -> Assistant:
    fields.setdefault("tools", ["calculator", "clock"])
    return Assistant(id=assistant_id, name=fields.pop("name", assistant_id.title()), **fields)


async def run(
    fake: FakeOpenAI,
    text: str = "hi",
    *,
    assistant_id: str = "default",
    assistants: Iterable[Assistant] = (),
    hooks: Mapping[str, Hooks] | None = None,
    connectors: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    history: FakeHistory | None = None,
    role_store: FakeRoles | None = None,
    tool: ToolFn | None = None,
    **settings: Any,
) -> Ports:
    config = load_settings(connectors=connectors or [openai_connector(fake)], runner={"coalesce_ms": 0}, **settings)
    ports = Ports(tool)
    ctx = RunContext(
        ports=ports,
        connectors=Connectors(config),
        assistants=Assistants(config, assistants, hooks),
        runner=config.runner,
        history=history,
        roles=role_store,
    )
    await run_pipeline(ctx, start_run(text, assistant_id, options, metadata))
    return ports
