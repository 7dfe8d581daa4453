"""The tool calls of one completion, with retries.

    RUN CALLS → all ok                     → ToolsDone
              → a retryable failure:
                  attempt < 3 → RETRY: the model gets its own calls, one `tool`
                                message per result (errors included) and a written
                                instruction; a plain-text answer → AnsweredOnRetry,
                                new calls → RUN CALLS again
                  attempt = 3 → the run fails (the errors in the text)
              → only non-retryable failures → ToolsFailed

Retryable means the tool-executor classified the failure so (bad arguments,
unknown tool): the model can fix it. Timeouts and server errors are not.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentstream.contracts import ChatMessage, MessageRole, SegmentBreak, ToolCallResult
from agentstream_runner.errors import RunFailure
from agentstream_runner.llm_step import Completion, llm_turn
from agentstream_runner.scope import MAX_TOOL_ATTEMPTS, RunScope
from agentstream_runner.tool_step import tool_round

RETRY_INSTRUCTION = (
    "Some of your tool calls failed. Read each error above, then call the tools again with corrected "
    "arguments (only the tools listed: {tools}), or answer in plain text if the tools cannot help."
)


@dataclass(frozen=True)
class ToolsDone:
    completion: Completion  # the completion whose calls all succeeded
    results: list[ToolCallResult]


@dataclass(frozen=True)
class AnsweredOnRetry:
    completion: Completion  # plain text, accepted as the answer


@dataclass(frozen=True)
class ToolsFailed:
    results: list[ToolCallResult]  # at least one non-retryable failure, no retryable one

    @property
    def error(self) -> str:
        return "; ".join(f"{r.tool}: {r.error}" for r in self.results if not r.ok)


PhaseEnd = ToolsDone | AnsweredOnRetry | ToolsFailed


def retry_instruction(tool_names: list[str]) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=RETRY_INSTRUCTION.format(tools=", ".join(tool_names) or "none"))


def describe_failures(results: list[ToolCallResult]) -> str:
    return "; ".join(f"{r.tool}: {r.error}" for r in results if not r.ok)


async def run_tool_calls(scope: RunScope, completion: Completion) -> PhaseEnd:
    """Run the completion's calls until they succeed, the model answers, or attempts run out."""
    attempt = 1
    while True:
        results = await tool_round(scope, completion.tool_calls, attempt)
        await scope.events.emit(SegmentBreak, reason="tool")
        failed = [r for r in results if not r.ok]
        if not failed:
            return ToolsDone(completion, results)
        if not any(r.retryable for r in failed):
            return ToolsFailed(results)
        if attempt >= MAX_TOOL_ATTEMPTS:
            raise RunFailure(f"tool calls still failing after {attempt} attempts: {describe_failures(results)}")
        attempt += 1
        scope.memory.append(retry_instruction(scope.tool_names))
        completion = await llm_turn(scope)
        if not completion.tool_calls:
            return AnsweredOnRetry(completion)
