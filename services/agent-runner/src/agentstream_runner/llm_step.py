"""One LLM call, streamed: `message.started`, coalesced `message.delta`s,
`message.completed`, wrapped in an `llm` step."""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass, field

from agentstream.contracts import (
    ChatMessage,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    ToolCallSpec,
    Usage,
    new_id,
)
from agentstream_runner.assistants import Assistant
from agentstream_runner.coalescer import CoalescingSender
from agentstream_runner.connectors import Connector, LLMRequest, TextDelta, ToolCallChunk, UsageChunk
from agentstream_runner.emitter import RunEmitter
from agentstream_runner.steps import step


@dataclass(frozen=True)
class Completion:
    text: str
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def as_message(self) -> ChatMessage:
        return ChatMessage(role="assistant", content=self.text, tool_calls=self.tool_calls)


async def stream_completion(
    events: RunEmitter, connector: Connector, request: LLMRequest, coalesce_s: float
) -> Completion:
    """Stream one model answer as message events; return what the model said."""
    message_id = new_id()
    text_parts: list[str] = []
    tool_calls: list[ToolCallSpec] = []
    usage = Usage()

    async def send_delta(text: str) -> None:
        await events.emit(MessageDelta, message_id=message_id, text=text)

    async with CoalescingSender(coalesce_s, send_delta) as deltas, aclosing(connector.stream(request)) as chunks:
        async for chunk in chunks:
            match chunk:
                case TextDelta(text=text) if text:
                    if not text_parts:
                        await events.emit(MessageStarted, message_id=message_id)
                    text_parts.append(text)
                    await deltas.push(text)
                case ToolCallChunk(call_id=call_id, name=name, arguments=arguments):
                    tool_calls.append(ToolCallSpec(id=call_id, name=name, arguments=arguments))
                case UsageChunk(usage=used):
                    usage = usage + used
    # Leaving the block flushed the last coalesced delta: completed comes after it.
    text = "".join(text_parts)
    if text_parts:
        await events.emit(MessageCompleted, message_id=message_id, text=text)
    return Completion(text=text, tool_calls=tool_calls, usage=usage)


async def llm_turn(
    events: RunEmitter,
    connector: Connector,
    assistant: Assistant,
    memory: list[ChatMessage],
    turn: int,
    coalesce_s: float,
) -> Completion:
    """One model call over `memory`; appends the assistant message to `memory`."""
    request = LLMRequest(messages=tuple(memory), tools=tuple(assistant.tools))
    step_input = {"turn": turn, "connector": connector.id, "messages": len(memory)}
    async with step(events, "llm", f"llm-{turn}", step_input) as record:
        completion = await stream_completion(events, connector, request, coalesce_s)
        memory.append(completion.as_message())
        record.output = {
            "text": completion.text,
            "tool_calls": [c.model_dump() for c in completion.tool_calls],
            "usage": completion.usage.model_dump(),
        }
        record.memory = memory
    return completion
