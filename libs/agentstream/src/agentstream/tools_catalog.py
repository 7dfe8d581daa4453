"""The built-in and workspace tools' specs: what the model is told about each tool.

Both sides read this module and neither imports the other: the agent-runner sends
these specs (name, description, JSON-schema parameters) to the model, the
tool-executor validates arguments against the same schema and runs the tool.
Tools of MCP servers and function groups are named `<source>__<tool>` (docs/tools.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from agentstream.config.tools import ToolsSettings


class ToolSpec(BaseModel):
    """One tool as a model sees it (OpenAI `function` shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


def _arguments(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON schema of an arguments object with these properties and no others."""
    schema: dict[str, Any] = {"type": "object", "properties": {**required, **(optional or {})}}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


CALCULATOR_SUPPORTED = "numbers, + - * / // % **, unary minus and parentheses"

CLOCK = ToolSpec(
    name="clock",
    description="The current date and time (ISO-8601), in UTC or the given time zone.",
    parameters=_arguments({}, {"timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}}),
)

CALCULATOR = ToolSpec(
    name="calculator",
    description="Evaluate an arithmetic expression: " + CALCULATOR_SUPPORTED + ".",
    parameters=_arguments({"expression": {"type": "string", "minLength": 1, "description": "e.g. (2 + 3) * 4 / 5"}}),
)

BUILTIN_TOOL_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in (CLOCK, CALCULATOR)}

# The workspace tools: served only when `tools.sandbox.enabled` (docs/tools.md).
_PATH = {"type": "string", "minLength": 1, "description": "Relative to the conversation's workspace."}
SHELL = ToolSpec(
    name="shell",
    description="Run a shell command (sh -c) in this conversation's workspace directory; returns exit code and output.",
    parameters=_arguments({"command": {"type": "string", "minLength": 1}}),
)
PYTHON = ToolSpec(
    name="python",
    description="Run a Python program in this conversation's workspace directory; returns exit code and output.",
    parameters=_arguments({"code": {"type": "string", "minLength": 1}}),
)
READ_FILE = ToolSpec(
    name="read_file",
    description="Read a text file from this conversation's workspace.",
    parameters=_arguments({"path": _PATH}),
)
WRITE_FILE = ToolSpec(
    name="write_file",
    description="Write a text file in this conversation's workspace (directories are created; an existing file is replaced).",
    parameters=_arguments({"path": _PATH, "content": {"type": "string"}}),
)
WORKSPACE_TOOL_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in (SHELL, PYTHON, READ_FILE, WRITE_FILE)}

# Tools from a source (an MCP server, a function group) are named `<source>__<tool>`;
# an assistant may name one of them, or `<source>__*` for all of that source's tools.
SOURCE_SEPARATOR = "__"
ALL_OF_SOURCE = "*"


def tool_spec(name: str) -> ToolSpec | None:
    """The spec of a tool every runner knows (built-in or workspace); None for a source's tool."""
    return BUILTIN_TOOL_SPECS.get(name) or WORKSPACE_TOOL_SPECS.get(name)


def source_tool_name(source: str, tool: str) -> str:
    return f"{source}{SOURCE_SEPARATOR}{tool}"


def split_source_tool_name(name: str) -> tuple[str, str] | None:
    """(source, tool) of `<source>__<tool>`; None for a built-in or workspace name."""
    source, sep, tool = name.partition(SOURCE_SEPARATOR)
    return (source, tool) if sep and source and tool else None


def is_tool_selector(selector: str) -> bool:
    """What an assistant's `tools` list may hold: a built-in or workspace tool, `<source>__<tool>`
    or `<source>__*`. A source's tools are known only to the executor that serves them."""
    return tool_spec(selector) is not None or split_source_tool_name(selector) is not None


def selects(selector: str, name: str) -> bool:
    """Whether an assistant's `tools` entry allows the tool `name`."""
    if selector == name:
        return True
    parts = split_source_tool_name(selector)
    named = split_source_tool_name(name)
    return parts is not None and named is not None and parts[1] == ALL_OF_SOURCE and parts[0] == named[0]


def approval_selectors(tools: ToolsSettings) -> tuple[str, ...]:
    """The tools `tools` marks `requires_approval`, as selectors: `tools.requires_approval` and
    every tool (`<server>__*`) of an MCP server with `requires_approval`. The executor publishes the
    flag from them; the runner holds to them before any executor is heard from."""
    servers = [f"{name}__{ALL_OF_SOURCE}" for name, server in tools.mcp_servers.items() if server.requires_approval]
    return (*tools.requires_approval, *servers)
