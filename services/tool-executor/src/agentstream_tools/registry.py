"""The tool registry: what the tool-executor can run, by name.

A tool is a name, a description, a JSON-schema for its arguments and an async
`run(args) -> str`. The schema is checked when the tool is registered, so a
broken tool definition fails at startup, not at the first call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jsonschema import Draft202012Validator

from agentstream.tools_catalog import ToolSpec

ToolFn = Callable[[dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolFn = field(repr=False)
    timeout_s: float | None = None  # None: the configured default (runner.tool_timeout_s)

    @cached_property
    def validator(self) -> Draft202012Validator:
        return Draft202012Validator(self.parameters)

    @cached_property
    def accepts_no_arguments(self) -> bool:
        """Whether `{}` satisfies the schema: checked once, not on every call without arguments."""
        return bool(self.validator.is_valid({}))

    @classmethod
    def from_spec(cls, spec: ToolSpec, run: ToolFn, timeout_s: float | None = None) -> Tool:
        """A tool whose model-facing description lives in `agentstream.tools_catalog`."""
        return cls(
            name=spec.name, description=spec.description, parameters=spec.parameters, run=run, timeout_s=timeout_s
        )

    def spec(self) -> dict[str, Any]:
        """The OpenAI-style function description a model gets."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        Draft202012Validator.check_schema(tool.parameters)
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        """Tools of a source (an MCP server) come and go while the executor runs."""
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
