"""The tool calls of one completion: one round, and the retries around it.

One round (`tool_round`): announce the calls, run them in parallel through the
tool-executor, report the results and feed them to memory, wrapped in a `tool` step.
Each call is bounded by `tool_timeout_s`; a call that times out becomes a failed,
non-retryable result so the model still gets an answer for every call it made.

The retries (`run_tool_calls`):

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

Only the assistant's tools run: a call of any other tool (a model under prompt injection, say)
is answered "unknown tool" without asking for approval or reaching an executor, counted
(`agentstream_runner_tool_calls_refused_total`) and logged. Every call that leaves carries the
assistant's `tools` list and its approval, signed by the ports (docs/tools.md § Which calls run).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import structlog

from agentstream.contracts import (
    ChatMessage,
    EventBase,
    MessageRole,
    SegmentBreak,
    StepType,
    ToolCall,
    ToolCallRefusal,
    ToolCallRequest,
    ToolCallResult,
    ToolCallSpec,
    ToolResult,
    utcnow,
)
from agentstream.contracts.steps import ToolStepInput, ToolStepOutput, ToolStepResult
from agentstream.tool_call_signing import offers
from agentstream_runner.emitter import step
from agentstream_runner.llm_step import Completion, llm_turn
from agentstream_runner.outcome import RunFailure
from agentstream_runner.scope import MAX_TOOL_ATTEMPTS, RunScope
from agentstream_runner.tool_approval import approval_gate

log = structlog.get_logger(__name__)

TIMED_OUT = "tool timed out"
# What a `tool.result` event copies from the call's result: all it has beside the run's identity.
RESULT_EVENT_FIELDS: set[str] = ToolResult.model_fields.keys() - EventBase.model_fields.keys() - {"type"}


def tool_message(result: ToolCallResult) -> ChatMessage:
    """What the model reads back for one call."""
    content = result.content if result.ok else f"error: {result.error}"
    return ChatMessage(role=MessageRole.TOOL, content=content, name=result.tool, tool_call_id=result.call_id)


def unknown_tool(scope: RunScope, call: ToolCallSpec) -> ToolCallResult:
    """The answer to a call of a tool the assistant was not offered: the model can call another."""
    offered = ", ".join(sorted(spec.name for spec in scope.tool_specs())) or "(none)"
    error = f"unknown tool {call.name[:64]!r}; available tools: {offered}"
    return scope.failed_call(call, error, retryable=True, refused=ToolCallRefusal.NOT_OFFERED)


def not_offered(scope: RunScope, calls: list[ToolCallSpec]) -> dict[str, ToolCallResult]:
    """The answers to the calls of tools outside the assistant's `tools`, by call id."""
    refused = {c.id: unknown_tool(scope, c) for c in calls if not offers(scope.tool_names, c.name)}
    for call_id, result in refused.items():
        log.warning(
            "tool call refused: not one of the assistant's tools",
            run_id=scope.run_id,
            assistant=scope.assistant.id,
            call_id=call_id,
            tool=result.tool[:64],
        )
    return refused


async def call_tool(
    scope: RunScope, call: ToolCallSpec, attempt: int, call_seq: int | None = None, approval_id: str | None = None
) -> ToolCallResult:
    """`call_seq`: the seq of the call's `tool.call` event, which the executor's heartbeats repeat;
    `approval_id`: the approval a person gave the call, if it needed one."""
    timeout_s = scope.ctx.runner.tool_timeout_s
    identity: dict[str, Any] = {
        "run_id": scope.run_id,
        "root_run_id": scope.events.root_run_id,
        "conversation_key": scope.start.conversation_key,
        "call_id": call.id,
        "tool": call.name,
    }
    request = ToolCallRequest(
        **identity,
        arguments=call.arguments,
        attempt=attempt,
        deadline=utcnow() + timedelta(seconds=timeout_s),
        call_seq=call_seq,
        offered=scope.tool_names,
        approval_id=approval_id,
    )
    # The request leaves inside this span: the executor's spans are its children.
    with scope.ctx.tracing.span(
        f"execute_tool {call.name}",
        {"gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id, "agentstream.tool.attempt": attempt},
        client=True,
    ) as span:
        try:
            async with asyncio.timeout(timeout_s):
                result = await scope.ctx.ports.call_tool(request)
        except TimeoutError:
            result = ToolCallResult(
                **identity, ok=False, error=TIMED_OUT, retryable=False, duration_ms=timeout_s * 1000
            )
        span.set_attribute("agentstream.tool.ok", result.ok)
        return result


async def tool_round(scope: RunScope, calls: list[ToolCallSpec], attempt: int = 1) -> list[ToolCallResult]:
    """Run `calls` (made in the latest assistant message); appends one tool message per result.

    Calls of tools the assistant was not offered are answered "unknown tool" at once; calls that
    need approval wait for it first (`approval_gate`); refused ones are answered with their
    refusal instead of running."""
    unoffered = not_offered(scope, calls)
    gate = await approval_gate(scope, [c for c in calls if c.id not in unoffered])
    refusals = unoffered | gate.refused
    events = scope.events
    step_input = ToolStepInput(attempt=attempt, calls=calls).as_json()
    async with step(events, StepType.TOOL, scope.step_id(StepType.TOOL), step_input) as record:
        announced = [
            await events.emit(ToolCall, call_id=call.id, tool=call.name, arguments=call.arguments, attempt=attempt)
            for call in calls
        ]
        # No heartbeat of its own: the pipeline heartbeats for the whole run, the executor for each call.
        results = await asyncio.gather(
            *(
                _refused(refusals[c.id])
                if c.id in refusals
                else call_tool(scope, c, attempt, a.seq, gate.approved.get(c.id))
                for c, a in zip(calls, announced, strict=True)
            )
        )
        for r in results:
            await events.emit(ToolResult, **r.model_dump(include=RESULT_EVENT_FIELDS))
        scope.memory.extend(tool_message(r) for r in results)
        shown = [
            ToolStepResult(call_id=r.call_id, tool=r.tool, ok=r.ok, content=r.content, error=r.error) for r in results
        ]
        record.output = ToolStepOutput(results=shown).as_json()
        record.memory = scope.memory
    return list(results)


async def _refused(result: ToolCallResult) -> ToolCallResult:
    return result


# -- retries -----------------------------------------------------------------------
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
        return describe_failures(self.results)


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
