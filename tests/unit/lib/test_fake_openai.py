"""The fake OpenAI server, checked with the official `openai` SDK itself."""

from __future__ import annotations

import json

import openai
import pytest
from openai import AsyncOpenAI

from agentstream_testing.fake_openai import FakeOpenAI


def _client(fake: FakeOpenAI) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=fake.base_url, api_key="test", max_retries=0)


async def test_echo_stream_with_usage() -> None:
    async with FakeOpenAI() as fake:
        stream = await _client(fake).chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello there world"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        parts, usage = [], None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                parts.append(chunk.choices[0].delta.content)
            usage = chunk.usage or usage
        assert parts == ["hello", " there", " world"]
        assert usage is not None and usage.completion_tokens == 3 and usage.prompt_tokens == 3
        assert fake.request_count == 1 and fake.requests[0].body["stream"] is True
        assert not fake.requests[0].closed_early


async def test_scripted_tool_calls_split_across_chunks_and_reasoning() -> None:
    async with FakeOpenAI() as fake:
        fake.add_turn(
            text="checking", reasoning="let me think", tool_calls=[("calculator", {"expression": "2+2"}), ("clock", {})]
        )
        stream = await _client(fake).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        calls: dict[int, dict[str, str]] = {}
        reasoning, pieces, finish = "", 0, None
        async for chunk in stream:
            choice = chunk.choices[0]
            finish = choice.finish_reason or finish
            reasoning += getattr(choice.delta, "reasoning_content", None) or ""
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.id or ""
                slot["name"] += (tc.function.name or "") if tc.function else ""
                slot["arguments"] += (tc.function.arguments or "") if tc.function else ""
                pieces += 1
        assert reasoning == "let me think"
        assert finish == "tool_calls"
        assert calls[0] == {"id": "call_1", "name": "calculator", "arguments": json.dumps({"expression": "2+2"})}
        assert calls[1]["name"] == "clock" and json.loads(calls[1]["arguments"]) == {}
        assert pieces > 2  # arguments really arrive in several deltas


async def test_error_modes_and_retry_after() -> None:
    async with FakeOpenAI() as fake:
        fake.add_turn(mode="429", retry_after=0.5)
        fake.add_turn(mode="500")
        client = _client(fake)
        with pytest.raises(openai.RateLimitError) as rate:
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert rate.value.response.headers["retry-after"] == "0.5"
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert fake.request_count == 2


async def test_non_streaming_completion() -> None:
    async with FakeOpenAI() as fake:
        fake.add_turn(text="four", tool_calls=[("calculator", {"expression": "2+2"})], usage=(7, 1))
        done = await _client(fake).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        message = done.choices[0].message
        assert message.content == "four" and message.tool_calls is not None
        assert message.tool_calls[0].function.name == "calculator"
        assert done.usage is not None and (done.usage.prompt_tokens, done.usage.completion_tokens) == (7, 1)


async def test_client_dropping_a_slow_stream_is_measured_at_the_server() -> None:
    async with FakeOpenAI() as fake:
        fake.add_turn(text=" ".join(["word"] * 50), mode="slow", token_delay_s=0.1)
        stream = await _client(fake).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        seen = 0
        async for _chunk in stream:
            seen += 1
            if seen == 2:
                break
        await stream.close()
        # The stream takes 5 s: seen closed before its end, the fake stopped streaming at the drop.
        await fake.wait_for(lambda f: f.requests[0].closed_early, timeout=4.0)
        request = fake.requests[0]
        assert request.closed_early and request.completed_at is None
        assert request.last_token_at is not None and request.closed_at is not None
        assert request.last_token_at <= request.closed_at  # no token after the drop
