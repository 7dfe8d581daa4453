"""The anthropic connector's mapping: messages to the Messages API, stream events to chunks."""

from __future__ import annotations

from types import SimpleNamespace as NS

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, ToolCallSpec, Usage
from agentstream.tools_catalog import CLOCK
from agentstream_runner.connectors.anthropic_connector import EventMapper, build_payload, to_anthropic_messages
from agentstream_runner.connectors.base import LLMRequest, TextDelta, ThinkingDelta, ToolCallChunk, UsageChunk


def test_messages_tools_and_results_map_to_blocks():
    messages = [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content="time?"),
        ChatMessage(
            role="assistant",
            content="checking",
            tool_calls=[ToolCallSpec(id="t1", name="clock", arguments='{"timezone": "UTC"}')],
        ),
        ChatMessage(role="tool", content="12:00", tool_call_id="t1", name="clock"),
        ChatMessage(role="user", content="thanks"),
    ]
    system, out = to_anthropic_messages(messages)
    assert system == "be brief"
    assert out == [
        {"role": "user", "content": [{"type": "text", "text": "time?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "t1", "name": "clock", "input": {"timezone": "UTC"}},
            ],
        },
        # the tool result and the next user message merge into one user turn
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "12:00"},
                {"type": "text", "text": "thanks"},
            ],
        },
    ]


def test_payload_carries_tools_and_sampling():
    settings = ConnectorSettings(id="c", type="anthropic", model="claude-x", max_tokens=99)
    payload = build_payload(
        settings,
        LLMRequest(
            messages=[ChatMessage(role="user", content="hi")], tools=(CLOCK,), options={"temperature": 0.5, "seed": 1}
        ),
    )
    assert payload["model"] == "claude-x" and payload["max_tokens"] == 99 and payload["temperature"] == 0.5
    assert "seed" not in payload and "system" not in payload
    assert payload["tools"] == [{"name": "clock", "description": CLOCK.description, "input_schema": CLOCK.parameters}]


def test_stream_events_become_chunks():
    mapper = EventMapper()
    events = [
        NS(type="message_start", message=NS(usage=NS(input_tokens=10, output_tokens=1))),
        NS(type="content_block_start", index=0, content_block=NS(type="thinking")),
        NS(type="content_block_delta", index=0, delta=NS(type="thinking_delta", thinking="hmm")),
        NS(type="content_block_start", index=1, content_block=NS(type="text")),
        NS(type="content_block_delta", index=1, delta=NS(type="text_delta", text="Let me")),
        NS(type="content_block_start", index=2, content_block=NS(type="tool_use", id="tu1", name="clock")),
        NS(type="content_block_delta", index=2, delta=NS(type="input_json_delta", partial_json='{"timez')),
        NS(type="content_block_delta", index=2, delta=NS(type="input_json_delta", partial_json='one": "UTC"}')),
        NS(type="message_delta", usage=NS(output_tokens=7)),
    ]
    chunks = [c for e in events for c in mapper.feed(e)] + mapper.finish()
    assert chunks == [
        ThinkingDelta("hmm"),
        TextDelta("Let me"),
        ToolCallChunk(call_id="tu1", name="clock", arguments='{"timezone": "UTC"}'),
        UsageChunk(Usage(prompt_tokens=10, completion_tokens=7, llm_calls=1)),
    ]
