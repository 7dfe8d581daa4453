"""The built-in tools' specs: what the model is told about each tool.

Both sides read this module and neither imports the other: the agent-runner sends
these specs (name, description, JSON-schema parameters) to the model, the
tool-executor validates arguments against the same schema and runs the tool.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolSpec(BaseModel):
    """One tool as a model sees it (OpenAI `function` shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


CALCULATOR_SUPPORTED = "numbers, + - * / // % **, unary minus and parentheses"

CLOCK = ToolSpec(
    name="clock",
    description="The current date and time (ISO-8601), in UTC or the given time zone.",
    parameters={
        "type": "object",
        "properties": {"timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}},
        "additionalProperties": False,
    },
)

CALCULATOR = ToolSpec(
    name="calculator",
    description="Evaluate an arithmetic expression: " + CALCULATOR_SUPPORTED + ".",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "minLength": 1, "description": "e.g. (2 + 3) * 4 / 5"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
)

BUILTIN_TOOL_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in (CLOCK, CALCULATOR)}


def tool_spec(name: str) -> ToolSpec | None:
    return BUILTIN_TOOL_SPECS.get(name)
