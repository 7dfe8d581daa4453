"""Built-in tools."""

from agentstream_tools.builtin.calculator import CALCULATOR
from agentstream_tools.builtin.clock import clock_tool
from agentstream_tools.registry import Tool


def builtin_tools() -> list[Tool]:
    return [clock_tool(), CALCULATOR]


__all__ = ["builtin_tools"]
