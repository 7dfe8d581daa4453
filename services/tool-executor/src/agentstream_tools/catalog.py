"""What this executor serves, published on `tool-catalog` for the runners (docs/tools.md).

One `ToolCatalogEntry` per tool, keyed by the tool's name: on start, at once when the tools
change (an MCP server connected or went away: `CatalogChanges`), and every `interval_s` as a
heartbeat, so runners drop the tools of an executor that died without a word. A tool it no
longer serves, and on stop every tool, is published with `available=false`.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from agentstream.config.tools import ToolsSettings
from agentstream.contracts import ToolCatalogEntry, ToolKind, new_id
from agentstream.kafka.topics import TOOL_CATALOG
from agentstream.publishing import Publisher
from agentstream.tools_catalog import (
    BUILTIN_TOOL_SPECS,
    WORKSPACE_TOOL_SPECS,
    approval_selectors,
    selects,
    split_source_tool_name,
)
from agentstream_tools.registry import Tool, ToolRegistry


def new_executor_id() -> str:
    """Unique per executor process, and readable: host, pid and a random part (two executors
    in one process, as in tests, still differ)."""
    return f"{socket.gethostname()[:64]}-{os.getpid()}-{new_id()[:8]}"


class CatalogChanges:
    """Told by a tool source when the tools it serves change; the publisher republishes at once."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def notify(self) -> None:
        self._changed.set()

    async def wait(self, timeout_s: float) -> None:
        """Until a change or `timeout_s`, whichever comes first."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._changed.wait()
        except TimeoutError:
            pass
        self._changed.clear()


@dataclass(frozen=True)
class ApprovalPolicy:
    """Which tools are published `requires_approval`: the ones `tools.requires_approval` selects,
    every tool of an MCP server with `requires_approval`, and the workspace tools while
    `tools.sandbox.requires_approval` holds."""

    selectors: tuple[str, ...] = ()
    workspace: bool = False

    @classmethod
    def of(cls, tools: ToolsSettings) -> ApprovalPolicy:
        return cls(approval_selectors(tools), tools.sandbox.requires_approval)

    def requires(self, name: str, kind: ToolKind) -> bool:
        if kind is ToolKind.WORKSPACE and self.workspace:
            return True
        return any(selects(selector, name) for selector in self.selectors)


class CatalogPublisher:
    def __init__(
        self,
        publisher: Publisher,
        log: Any,
        tools: ToolRegistry,
        changes: CatalogChanges,
        *,
        interval_s: float,
        mcp_sources: Collection[str],
        offline: Callable[[], set[str]],
        executor_id: str | None = None,
        approval: ApprovalPolicy | None = None,
    ) -> None:
        """`approval`: which tools wait for a person's approval (none without it); `offline`: names of registered tools that cannot be called now (their MCP server is
        not connected); `mcp_sources`: the MCP server names, to tell their tools from functions."""
        self.executor_id = executor_id or new_executor_id()
        self._publisher = publisher
        self._log = log
        self._tools = tools
        self._changes = changes
        self._interval_s = interval_s
        self._mcp_sources = frozenset(mcp_sources)
        self._offline = offline
        self._approval = approval or ApprovalPolicy()
        self._published: set[str] = set()  # tools last said to be available
        self._task: asyncio.Task[None] | None = None

    def _kind(self, name: str) -> tuple[ToolKind, str | None]:
        if name in BUILTIN_TOOL_SPECS:
            return ToolKind.BUILTIN, None
        if name in WORKSPACE_TOOL_SPECS:
            return ToolKind.WORKSPACE, None
        parts = split_source_tool_name(name)
        source = parts[0] if parts is not None else None
        return (ToolKind.MCP if source in self._mcp_sources else ToolKind.FUNCTION), source

    def _entry(self, tool: Tool, available: bool) -> ToolCatalogEntry:
        kind, source = self._kind(tool.name)
        return ToolCatalogEntry(
            tool=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            kind=kind,
            source=source,
            executor_id=self.executor_id,
            available=available,
            requires_approval=self._approval.requires(tool.name, kind),
            heartbeat_s=self._interval_s,
        )

    def _gone(self, name: str) -> ToolCatalogEntry:
        kind, source = self._kind(name)
        return ToolCatalogEntry(
            tool=name,
            kind=kind,
            source=source,
            executor_id=self.executor_id,
            available=False,
            heartbeat_s=self._interval_s,
        )

    async def _send(self, entries: list[ToolCatalogEntry]) -> None:
        acks: list[asyncio.Future[Any]] = []
        for entry in entries:  # keyed by the tool's name (the topic's key)
            acks.append(await self._publisher.publish_nowait(TOOL_CATALOG, entry))
        await asyncio.gather(*acks)

    async def publish(self) -> None:
        """Every tool served now as available, every tool no longer served as gone."""
        offline = self._offline()
        serving = {tool.name: tool for tool in self._tools if tool.name not in offline}
        gone = self._published - set(serving)
        await self._send([self._entry(t, True) for t in serving.values()] + [self._gone(n) for n in sorted(gone)])
        if gone or set(serving) != self._published:
            self._log.info(
                "tool catalog published", executor=self.executor_id, tools=sorted(serving), gone=sorted(gone)
            )
        self._published = set(serving)

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self.publish()
            except Exception as err:  # the broker is away: runners expire our tools, the next beat restores them
                self._log.warning(
                    "tool catalog not published; retrying",
                    topic=TOOL_CATALOG.name,
                    error=repr(err),
                    retry_in_s=self._interval_s,
                )
            await self._changes.wait(self._interval_s)

    def requires_approval(self, name: str) -> bool:
        """What this executor publishes for `name` (a tool it does not serve: by the selectors alone)."""
        return self._approval.requires(name, self._kind(name)[0])

    def start(self) -> None:
        """Publish now and then on every change and heartbeat (needs the broker started)."""
        self._task = asyncio.create_task(self._heartbeat(), name="tool-catalog-heartbeat")

    async def withdraw(self) -> None:
        """Stop publishing and say every tool is gone: runners stop offering them at once."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        gone = sorted(self._published)
        self._published = set()
        if gone:
            await self._send([self._gone(name) for name in gone])
            self._log.info("tool catalog withdrawn", executor=self.executor_id, tools=gone)
