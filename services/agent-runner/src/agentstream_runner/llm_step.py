"""One LLM call, streamed: `message.started`, coalesced `message.delta`s (text,
and `kind=thinking` for reasoning), `message.completed`, wrapped in an `llm` step."""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field, replace
from typing import assert_never

from agentstream.contracts import (
    ChatMessage,
    DeltaKind,
    MessageCompleted,
    MessageDelta,
    MessageRole,
    MessageStarted,
    StepType,
    ToolCallSpec,
    Usage,
    new_id,
)
from agentstream.contracts.limits import MAX_NAME
from agentstream.contracts.steps import LlmStepInput, LlmStepOutput
from agentstream_runner.coalescer import CoalescingSender
from agentstream_runner.connectors.base import (
    Connector,
    LLMRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallChunk,
    UsageChunk,
)
from agentstream_runner.emitter import RunEmitter, step
from agentstream_runner.scope import RunScope


@dataclass(frozen=True)
class Completion:
    text: str
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def as_message(self) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content=self.text, tool_calls=self.tool_calls)


async def stream_completion(
    events: RunEmitter, connector: Connector, request: LLMRequest, coalesce_s: float
) -> Completion:
    """Stream one model answer as message events; return what the model said."""
    message_id = new_id()
    text_parts: list[str] = []
    tool_calls: list[ToolCallSpec] = []
    usage = Usage()
    started = False

    async def send_text(text: str) -> None:
        await events.emit(MessageDelta, message_id=message_id, text=text)

    async def send_thinking(text: str) -> None:
        await events.emit(MessageDelta, message_id=message_id, text=text, kind=DeltaKind.THINKING)

    async def start_message() -> None:
        nonlocal started
        if not started:
            started = True
            # What the run wrote before the model answered is stored first: the first token goes
            # out in a produce request of its own instead of queueing behind `step.started`'s.
            # Waited for here, not before the request: the model works meanwhile.
            await events.confirm()
            await events.emit(MessageStarted, message_id=message_id)

    async with AsyncExitStack() as stack:
        # Left in reverse order: the stream is closed first, then buffered thinking and
        # text are flushed (on an exception they are dropped, see CoalescingSender).
        deltas = await stack.enter_async_context(CoalescingSender(coalesce_s, send_text))
        thoughts = await stack.enter_async_context(CoalescingSender(coalesce_s, send_thinking))
        chunks = await stack.enter_async_context(aclosing(connector.stream(request)))
        async for chunk in chunks:
            match chunk:
                case TextDelta(text=text) if text:
                    if not started:
                        await start_message()
                    text_parts.append(text)
                    if thoughts.pending:  # reasoning precedes the answer it led to
                        await thoughts.flush()
                    await deltas.push(text)
                case ThinkingDelta(text=text) if text:
                    await start_message()
                    await thoughts.push(text)
                case ToolCallChunk(call_id=call_id, name=name, arguments=arguments):
                    tool_calls.append(ToolCallSpec(id=call_id, name=name, arguments=arguments))
                case UsageChunk(usage=used):
                    usage = usage + used
                case TextDelta() | ThinkingDelta():
                    pass  # empty: nothing to show
                case _:
                    assert_never(chunk)
    # Leaving the block flushed the last coalesced deltas: completed comes after them.
    text = "".join(text_parts)
    if started:
        await events.emit(MessageCompleted, message_id=message_id, text=text)
    return Completion(text=text, tool_calls=tool_calls, usage=usage)


async def llm_turn(scope: RunScope, *, with_tools: bool = True) -> Completion:
    """One model call over the scope's memory; appends the assistant message to it.

    Usage goes to the root's totals even when the call fails half way (a broken
    stream still cost its tokens only if the connector reported them)."""
    tools = scope.tool_specs() if with_tools else ()
    request = LLMRequest(messages=tuple(scope.memory), tools=tools, options=dict(scope.options))
    step_input = LlmStepInput(
        connector=scope.connector.id, messages=len(scope.memory), tools=[t.name for t in tools]
    ).as_json()
    async with step(scope.events, StepType.LLM, scope.step_id(StepType.LLM), step_input) as record:
        with scope.ctx.tracing.span(
            f"chat {scope.connector.id}",
            {"gen_ai.operation.name": "chat", "agentstream.connector": scope.connector.id},
            client=True,
        ) as span:
            completion = await stream_completion(
                scope.events, scope.connector, request, scope.ctx.runner.coalesce_ms / 1000
            )
            span.set_attribute("gen_ai.usage.input_tokens", completion.usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", completion.usage.completion_tokens)
            span.set_attribute("agentstream.tool_calls", len(completion.tool_calls))
        # A call's id keys its execution (`run_id:call_id`, claimed once by the executor): an id the
        # model reused would be answered with the earlier call's stored result (docs/tools.md).
        taken = [c.id for m in scope.memory for c in m.tool_calls]
        completion = replace(completion, tool_calls=distinct_call_ids(completion.tool_calls, taken))
        scope.totals.add(completion.usage)
        scope.memory.append(completion.as_message())
        record.output = LlmStepOutput(
            text=completion.text, tool_calls=list(completion.tool_calls), usage=completion.usage
        ).as_json()
        record.memory = scope.memory
    return completion


def distinct_call_ids(calls: list[ToolCallSpec], taken: Collection[str]) -> list[ToolCallSpec]:
    """`calls` with every id no earlier call has (`taken`, nor another of `calls`): a repeated id
    gets `-2`, `-3`, ... Servers that number calls per answer (`call_1` in every one) and the
    ids filled in for servers that send none would otherwise repeat within a run."""
    seen = set(taken)
    distinct = []
    for call in calls:
        call_id, n = call.id, 2
        while call_id in seen:
            suffix = f"-{n}"
            call_id, n = call.id[: MAX_NAME - len(suffix)] + suffix, n + 1
        seen.add(call_id)
        distinct.append(call if call_id == call.id else call.model_copy(update={"id": call_id}))
    return distinct
