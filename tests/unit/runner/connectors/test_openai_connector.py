"""The openai connector against the fake server (real HTTP, real SSE), and its retry policy."""

from __future__ import annotations

import json

import pytest

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, ToolCallSpec, Usage
from agentstream.tools_catalog import CALCULATOR, CLOCK
from agentstream_runner.connectors.base import LLMRequest, TextDelta, ThinkingDelta, ToolCallChunk, UsageChunk
from agentstream_runner.connectors.openai_connector import OpenAIConnector, to_openai_message
from agentstream_runner.connectors.retry import LLMError, RetryPolicy, retry_after_seconds
from agentstream_testing.fake_openai import FakeOpenAI

USER = [ChatMessage(role="user", content="hello there")]


def connector(fake: FakeOpenAI, sleeps: list[float] | None = None, **extra) -> OpenAIConnector:
    async def sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    settings = ConnectorSettings(id="gpt", type="openai", base_url=fake.base_url, model="m", **extra)
    return OpenAIConnector(settings, sleep=sleep)


async def collect(conn: OpenAIConnector, request: LLMRequest) -> list:
    try:
        return [chunk async for chunk in conn.stream(request)]
    finally:
        await conn.aclose()


@pytest.mark.parametrize("http_client", ["aiohttp", "httpx"])
async def test_streamed_text_reasoning_tool_calls_and_usage(http_client):
    async with FakeOpenAI() as fake:
        fake.add_turn(
            text="let me compute",
            reasoning="think first",
            tool_calls=[("calculator", {"expression": "6*7"}), ("clock", {"timezone": "UTC"})],
            usage=(11, 5),
        )
        chunks = await collect(
            connector(fake, http_client=http_client),
            LLMRequest(messages=USER, tools=(CALCULATOR, CLOCK), options={"temperature": 0.2, "unknown": 1}),
        )
        body = fake.requests[0].body
    assert "".join(c.text for c in chunks if isinstance(c, ThinkingDelta)) == "think first"
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "let me compute"
    calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "calculator", {"expression": "6*7"}),
        ("call_2", "clock", {"timezone": "UTC"}),
    ]
    assert chunks[-1] == UsageChunk(Usage(prompt_tokens=11, completion_tokens=5, llm_calls=1))
    # The tool specs and sampling options reach the model; unknown options do not.
    assert body["tools"] == [
        {"type": "function", "function": CALCULATOR.model_dump()},
        {"type": "function", "function": CLOCK.model_dump()},
    ]
    assert body["stream_options"] == {"include_usage": True} and body["temperature"] == 0.2
    assert "unknown" not in body


async def test_the_api_key_goes_as_a_bearer_token(monkeypatch):
    monkeypatch.setenv("FAKE_MODEL_KEY", "sk-test-123")
    async with FakeOpenAI() as fake:
        fake.add_turn(text="hi")
        chunks = await collect(connector(fake, api_key_env="FAKE_MODEL_KEY"), LLMRequest(messages=USER))
        headers = fake.requests[0].headers
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "hi"
    assert headers["authorization"] == "Bearer sk-test-123"
    assert headers["content-type"] == "application/json"


async def test_non_streaming_connector():
    async with FakeOpenAI() as fake:
        fake.add_turn(text="plain answer", usage=(3, 2))
        chunks = await collect(connector(fake, capabilities=["tools"]), LLMRequest(messages=USER))
        assert "stream" not in fake.requests[0].body
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta("plain answer")]
    assert chunks[-1] == UsageChunk(Usage(prompt_tokens=3, completion_tokens=2, llm_calls=1))


@pytest.mark.parametrize("status", ["429", "500", "502", "503", "504"])
async def test_transient_errors_are_retried_honouring_retry_after(status):
    sleeps: list[float] = []
    async with FakeOpenAI() as fake:
        fake.add_turn(mode=status, retry_after=1.5)
        fake.add_turn(mode=status)
        fake.add_turn(text="finally")
        chunks = await collect(connector(fake, sleeps, retry_base_delay_s=0.25), LLMRequest(messages=USER))
        assert fake.request_count == 3
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == "finally"
    assert sleeps == [1.5, 0.5]  # Retry-After first, then backoff 0.25 * 2**1


async def test_three_transient_failures_fail_the_call():
    async with FakeOpenAI() as fake:
        for _ in range(3):
            fake.add_turn(mode="503")
        with pytest.raises(LLMError, match="failed after 3 attempts: HTTP 503"):
            await collect(connector(fake, []), LLMRequest(messages=USER))
        assert fake.request_count == 3


@pytest.mark.parametrize("status", ["400", "401", "404", "422"])
async def test_client_errors_are_never_retried(status):
    async with FakeOpenAI() as fake:
        fake.add_turn(mode=status)
        fake.add_turn(text="never requested")
        with pytest.raises(LLMError, match=f"rejected \\(HTTP {status}"):
            await collect(connector(fake, []), LLMRequest(messages=USER))
        assert fake.request_count == 1


async def test_connection_errors_are_transient():
    async with FakeOpenAI() as fake:
        port = fake.port  # closed once the block ends: every attempt fails to connect
    settings = ConnectorSettings(
        id="gpt", type="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=0.5
    )
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    # aiohttp reports a refused connection as a connect timeout (fast, not after timeout_s): both are
    # connection errors, and transient.
    with pytest.raises(LLMError, match="failed after 3 attempts: API(Connection|Timeout)Error"):
        await collect(OpenAIConnector(settings, sleep=sleep), LLMRequest(messages=USER))
    assert len(sleeps) == 2


def test_retry_policy_and_retry_after_parsing():
    policy = RetryPolicy(attempts=3, base_delay_s=0.5, max_delay_s=4)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert policy.delay(1, 30) == 4 and policy.delay(1, -1) == 0
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) < 0
    assert retry_after_seconds({"retry-after": "soon"}) is None and retry_after_seconds({}) is None


def test_message_mapping():
    calls = [ToolCallSpec(id="c1", name="clock", arguments="{}")]
    assert to_openai_message(ChatMessage(role="assistant", content="", tool_calls=calls)) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}],
    }
    assert to_openai_message(ChatMessage(role="tool", content="42", name="clock", tool_call_id="c1")) == {
        "role": "tool",
        "content": "42",
        "tool_call_id": "c1",
    }
