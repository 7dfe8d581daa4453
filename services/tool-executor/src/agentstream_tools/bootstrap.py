"""Builds the tool-executor: its infra, the tools it can run, the `tool_calls` store, its options."""

from __future__ import annotations

from agentstream.config import Settings
from agentstream.service import Infra
from agentstream_tools.app import ExecutorOptions, ToolExecutorService
from agentstream_tools.builtin import builtin_tools
from agentstream_tools.call_store import ToolCallStore
from agentstream_tools.registry import ToolRegistry


def bootstrap(
    settings: Settings,
    *,
    tools: ToolRegistry | None = None,
    store: ToolCallStore | None = None,
    service_class: type[ToolExecutorService] = ToolExecutorService,
) -> ToolExecutorService:
    """`tools` and `store` replace the built-in registry and the database store (tests);
    `service_class` a subclass that changes how it publishes or commits (chaos tests)."""
    infra = Infra.build(settings, ToolExecutorService.name, uses_database=True)
    assert infra.sessions is not None  # uses_database: the engine is built, lazily connected
    return service_class(
        infra,
        tools=tools if tools is not None else ToolRegistry(builtin_tools()),
        store=store if store is not None else ToolCallStore(infra.sessions),
        options=ExecutorOptions.model_validate(settings.tools),
    )
