"""MCP servers: each configured server is started (stdio) or connected to (streamable HTTP)
with the official `mcp` SDK, and its tools are served as `<server>__<tool>`.

One supervisor task per server owns the connection (the SDK's context managers must be
entered and left in one task): it connects, lists the tools into the registry, pings the
server every `ping_interval_s`, and when the connection is lost (a crash, a closed stream,
a ping unanswered: a hung server) it reconnects with exponential backoff. Calls run in the
callers' tasks, at most `max_concurrency` at once per server.

What the model gets when a server fails is a non-retryable `ToolError` that names the
server: calling again with other arguments cannot help. See docs/tools.md.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any

from jsonschema.exceptions import SchemaError
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    CallToolResult,
    EmbeddedResource,
    PaginatedRequestParams,
    TextContent,
    TextResourceContents,
)
from mcp_types import Tool as McpTool

from agentstream.config.tools import McpServerSettings
from agentstream.observability import get_logger
from agentstream.tools_catalog import ToolSpec, source_tool_name
from agentstream_tools.catalog import CatalogChanges
from agentstream_tools.registry import Tool, ToolRegistry
from agentstream_tools.validation import MAX_ERROR_CHARS, ToolError

log = get_logger("agentstream.tool-executor.mcp")


class McpServerUnavailable(ToolError):
    """The server crashed, hangs or cannot be reached: not the model's mistake, not retryable."""


def content_text(result: CallToolResult) -> str:
    """What the model reads of a tool's result: its text blocks; other blocks by a short label."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
            parts.append(block.resource.text)
        else:
            parts.append(f"[{block.type} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


class McpServer:
    def __init__(
        self, name: str, config: McpServerSettings, registry: ToolRegistry, changes: CatalogChanges | None = None
    ) -> None:
        self.name = name
        self.config = config
        self.registry = registry
        self.changes = changes or CatalogChanges()  # told when this server's tools come or go
        self.tool_names: set[str] = set()  # registry names of this server's tools
        self._session: ClientSession | None = None
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._connected = asyncio.Event()
        self._lost = asyncio.Event()  # set by a call that found the connection gone
        self._check = asyncio.Event()  # set by a call that timed out: ping now, the server may hang
        self._task: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._session is not None

    # -- connection ----------------------------------------------------------------
    def _transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Any]:
        c = self.config
        if c.command is not None:
            missing = [n for n in c.pass_env if n not in os.environ]
            if missing:
                log.warning("MCP server environment variables not set", server=self.name, names=missing)
            env = c.env | {n: os.environ[n] for n in c.pass_env if n in os.environ}
            return stdio_client(StdioServerParameters(command=c.command, args=c.args, env=env or None, cwd=c.cwd))
        assert c.url is not None
        headers = c.headers | {h: os.environ.get(var, "") for h, var in c.headers_env.items()}
        client = create_mcp_http_client(headers=headers)
        stack.push_async_callback(client.aclose)
        return streamable_http_client(c.url, http_client=client)

    async def _list_tools(self, session: ClientSession) -> list[McpTool]:
        tools: list[McpTool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    def _serve(self, listed: Iterable[McpTool]) -> None:
        """Put the listed tools in the registry; tools the server no longer lists leave it."""
        served: set[str] = set()
        for mcp_tool in listed:
            name = source_tool_name(self.name, mcp_tool.name)
            try:
                spec = ToolSpec(name=name, description=mcp_tool.description or "", parameters=mcp_tool.input_schema)
                tool = Tool.from_spec(spec, self._runner(mcp_tool.name), timeout_s=self.config.call_timeout_s)
                self.registry.remove(name)
                self.registry.register(tool)
            except (ValueError, SchemaError) as err:  # a name the models' APIs refuse, a broken schema
                log.warning("MCP tool not served", server=self.name, tool=mcp_tool.name, error=str(err)[:300])
                continue
            served.add(name)
        for gone in self.tool_names - served:
            self.registry.remove(gone)
        self.tool_names = served

    async def _connection(self) -> None:
        """One connection's life: returns (or raises) when it is lost."""
        async with AsyncExitStack() as stack:
            async with asyncio.timeout(self.config.connect_timeout_s):
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listed = await self._list_tools(session)
            self._serve(listed)
            self._lost.clear()
            self._session = session
            self._connected.set()
            self.changes.notify()
            log.info("MCP server connected", server=self.name, tools=sorted(self.tool_names))
            try:
                await self._watch(session)
            finally:
                self._session = None
                self._connected.clear()
                self.changes.notify()

    async def _watch(self, session: ClientSession) -> None:
        while not self._lost.is_set():
            self._check.clear()
            waits = {asyncio.create_task(self._lost.wait()), asyncio.create_task(self._check.wait())}
            try:
                await asyncio.wait(waits, timeout=self.config.ping_interval_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
            if self._lost.is_set():
                return
            try:
                async with asyncio.timeout(self.config.connect_timeout_s):
                    await session.send_ping()
            except Exception as err:  # closed, or no answer in time: a hung server is restarted
                log.warning("MCP server did not answer a ping", server=self.name, error=repr(err))
                return

    async def _supervise(self) -> None:
        delay = self.config.reconnect_min_s
        while True:
            try:
                await self._connection()
                delay = self.config.reconnect_min_s  # it was up: the next loss starts the backoff again
                log.warning("MCP server connection lost; reconnecting", server=self.name, retry_in_s=delay)
            except Exception as err:  # a failed start or connect: try again later, the executor stays up
                log.error(
                    "MCP server not reachable; retrying",
                    server=self.name,
                    transport=self.config.transport.value,
                    error=repr(err),
                    retry_in_s=delay,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.reconnect_max_s)

    async def start(self) -> None:
        """Start connecting; wait at most `connect_timeout_s` for the first connection (the
        executor starts anyway and the supervisor keeps trying)."""
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")
        try:
            await asyncio.wait_for(self._connected.wait(), self.config.connect_timeout_s)
        except TimeoutError:
            log.warning("MCP server not connected at start; its tools appear once it is", server=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for name in self.tool_names:
            self.registry.remove(name)
        self.tool_names = set()
        self.changes.notify()

    # -- calls ---------------------------------------------------------------------
    def _runner(self, tool: str) -> Any:
        async def run(args: dict[str, Any]) -> str:
            return await self.call(tool, args)

        return run

    def _unavailable(self, what: str) -> McpServerUnavailable:
        return McpServerUnavailable(f"MCP server {self.name!r} {what}; do not call its tools again in this answer")

    async def call(self, tool: str, args: dict[str, Any]) -> str:
        async with self._slots:
            session = self._session
            if session is None:
                raise self._unavailable("is not connected (it crashed or cannot be reached; reconnecting)")
            try:
                result = await session.call_tool(tool, args)
            except asyncio.CancelledError:  # the call's timeout: the server may hang, look now
                self._check.set()
                raise
            except MCPError as err:
                if err.code == CONNECTION_CLOSED:
                    self._lost.set()
                    raise self._unavailable(
                        "went away during the call (the call may or may not have had its effect)"
                    ) from None
                raise ToolError(f"MCP server {self.name!r} refused the call: {err.message}"[:MAX_ERROR_CHARS]) from None
            except Exception as err:  # the transport broke (a closed stream, an HTTP error)
                log.warning("MCP call failed in transport", server=self.name, tool=tool, error=repr(err))
                self._lost.set()
                raise self._unavailable("could not be reached during the call") from None
        if result.is_error:
            raise ToolError(f"{source_tool_name(self.name, tool)} failed: {content_text(result)}"[:MAX_ERROR_CHARS])
        return content_text(result)


class McpServers:
    """All configured servers: started with the executor, stopped with it."""

    def __init__(
        self, configs: dict[str, McpServerSettings], registry: ToolRegistry, changes: CatalogChanges | None = None
    ) -> None:
        """`changes` is told whenever a server connects or goes away (the tool catalogue)."""
        self.servers = {name: McpServer(name, config, registry, changes) for name, config in configs.items()}

    def offline_tools(self) -> set[str]:
        """Registered tools of servers not connected now: not offered to models until they are."""
        return {name for server in self.servers.values() if not server.connected for name in server.tool_names}

    async def start(self) -> None:
        await asyncio.gather(*(s.start() for s in self.servers.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers.values()))
