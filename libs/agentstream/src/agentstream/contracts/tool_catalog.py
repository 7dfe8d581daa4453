"""`tool-catalog` topic (compacted). Key: tool name.

Each tool-executor says which tools it serves: on start, whenever a tool source changes (an
MCP server connects or goes away) and every `heartbeat_s` seconds. Runners read the topic from
the beginning and offer a model only the tools some executor serves now (docs/tools.md).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, TypeAdapter

from agentstream.contracts.base import Record
from agentstream.contracts.limits import Name

# Without a record for this many heartbeats, an executor is taken for dead and its tools as gone.
HEARTBEATS_MISSED_BEFORE_GONE = 3


class ToolKind(StrEnum):
    """Where a tool comes from (docs/tools.md): `builtin`, part of the executor; `workspace`, the sandbox's
    (`tools.sandbox`); `function`, a Python function (`tools.functions`); `mcp`, an MCP server's (`tools.mcp_servers`)."""

    BUILTIN = "builtin"
    WORKSPACE = "workspace"
    FUNCTION = "function"
    MCP = "mcp"


class ToolCatalogEntry(Record):
    """One tool as one executor serves it (or no longer does). `ts` is when the executor said so."""

    type: Literal["tool.catalog_entry"] = "tool.catalog_entry"
    tool: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="The name the model calls it by.")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict, description="JSON schema of its arguments.")
    kind: ToolKind
    source: Name | None = Field(default=None, description="The MCP server or function group; None for the others.")
    executor_id: Name = Field(description="The executor serving it: each replica has its own.")
    available: bool = Field(description="False: this executor stopped serving it (stopped, or its server is gone).")
    requires_approval: bool = Field(
        default=False, description="A call pauses the run until a person approves it (docs/tools.md § Approval)."
    )
    heartbeat_s: float = Field(gt=0, description="The executor republishes this often; 3 missed: the entry is gone.")

    def expires_after_s(self) -> float:
        return HEARTBEATS_MISSED_BEFORE_GONE * self.heartbeat_s


ToolCatalogEntryAdapter: TypeAdapter[ToolCatalogEntry] = TypeAdapter(ToolCatalogEntry)
