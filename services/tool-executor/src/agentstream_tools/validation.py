"""Failure classification by error type (arguments are checked in arguments.py).

The type of the exception says whether the model can fix the call by itself:
- `ArgumentError` (invalid JSON, schema violation, a bad value a tool rejects) and
  `UnknownTool` are retryable: the model gets a message saying what was wrong;
- `ToolTimeout`, `ToolError` (a tool's own clean failure) and any other exception
  raised by a tool are not.
Messages never decide the class.

What the model reads is short and says what was wrong; input is quoted at most
`SHOWN_CHARS` long (`shown`). An unexpected exception's text may carry file paths or
other internals: the model gets only its type, the executor logs the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentstream_tools.registry import Tool, ToolRegistry

SHOWN_CHARS = 64
MAX_ERROR_CHARS = 300


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`repr(value)` cut to `limit` characters (with `…`): enough to see which input was meant."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bounded(message: str) -> str:
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 1] + "…"


class ToolFailure(Exception):
    retryable: ClassVar[bool] = False


class ArgumentError(ToolFailure):
    """The call's arguments are wrong; tools raise it for values they reject."""

    retryable = True


class UnknownTool(ToolFailure):
    retryable = True

    def __init__(self, name: str, registry: ToolRegistry) -> None:
        super().__init__(f"unknown tool {shown(name)}; available tools: {', '.join(registry.names()) or '(none)'}")


class ToolTimeout(ToolFailure):
    retryable = False


class ToolError(ToolFailure):
    """A tool's own failure with a message fit for the model (e.g. division by zero)."""

    retryable = False


@dataclass(frozen=True)
class Failure:
    message: str
    retryable: bool


def classify(err: Exception) -> Failure:
    if isinstance(err, ToolFailure):
        return Failure(_bounded(str(err)), type(err).retryable)
    return Failure(f"the tool failed unexpectedly ({type(err).__name__})", retryable=False)


def lookup(registry: ToolRegistry, name: str) -> Tool:
    tool = registry.get(name)
    if tool is None:
        raise UnknownTool(name, registry)
    return tool
