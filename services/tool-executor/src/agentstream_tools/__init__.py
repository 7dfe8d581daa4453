"""tool-executor: consumes `tool-calls`, produces `tool-results`."""

from agentstream_tools.app import ToolExecutorService

__all__ = ["ToolExecutorService"]
