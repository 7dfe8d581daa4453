"""Builds the tool-executor: its infra, the tools it can run, the `tool_calls` store,
its MCP servers and the publisher of what it serves on `tool-catalog` (told of MCP changes)."""

from __future__ import annotations

from agentstream.config import Settings
from agentstream.parts.readiness import database_ready
from agentstream.service import Infra, Runtime
from agentstream.tool_call_signing import call_secret
from agentstream_tools.app import ToolExecutorService
from agentstream_tools.builtin import builtin_tools
from agentstream_tools.call_store import ToolCallStore
from agentstream_tools.catalog import ApprovalPolicy, CatalogChanges, CatalogPublisher
from agentstream_tools.function_tools import load_function_tools
from agentstream_tools.mcp_servers import McpServers
from agentstream_tools.registry import ToolRegistry
from agentstream_tools.sandbox import workspace_tools


def configured_tools(settings: Settings) -> ToolRegistry:
    """Built-ins, the configured function tools and (when enabled) the sandboxed workspace tools.
    MCP servers add theirs once connected."""
    tools = ToolRegistry(builtin_tools())
    for tool in load_function_tools(settings.tools.functions)[0]:  # the others are logged with their path
        tools.register(tool)
    for tool in workspace_tools(settings.tools.sandbox):  # none unless tools.sandbox.enabled
        tools.register(tool)
    return tools


def bootstrap(
    settings: Settings,
    *,
    tools: ToolRegistry | None = None,
    store: ToolCallStore | None = None,
    service_class: type[ToolExecutorService] = ToolExecutorService,
) -> ToolExecutorService:
    """`tools` and `store` replace the built-in registry and the database store (tests);
    `service_class` a subclass that changes how it publishes or commits (chaos tests)."""
    secret = call_secret(settings.tools)  # first: a missing secret stops the start with the key to set
    infra = Infra.build(settings, ToolExecutorService.name, uses_database=True)
    assert infra.engine is not None  # uses_database: the engine is built, lazily connected
    runtime = Runtime(infra, checks={"database": database_ready(infra.engine)})
    registry = tools if tools is not None else configured_tools(settings)
    changes = CatalogChanges()
    mcp_servers = McpServers(settings.tools.mcp_servers, registry, changes)
    catalog = CatalogPublisher(
        infra.publisher,
        infra.log,
        registry,
        changes,
        interval_s=settings.tools.catalog_interval_s,
        mcp_sources=settings.tools.mcp_servers.keys(),
        offline=mcp_servers.offline_tools,
        approval=ApprovalPolicy.of(settings.tools),
    )
    return service_class(
        runtime,
        tools=registry,
        store=store if store is not None else ToolCallStore(infra.engine),
        mcp_servers=mcp_servers,
        catalog=catalog,
        call_secret=secret,
    )
