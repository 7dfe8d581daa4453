"""agent-runner: consumes `runs` + `tool-results`, produces `events` and `tool-calls`."""

from agentstream_runner.app import AgentRunnerService

__all__ = ["AgentRunnerService"]
