import json

import pytest

from agentstream.config import ConnectorSettings
from agentstream.contracts import ChatMessage, ToolCallSpec
from agentstream.tools_catalog import ToolSpec
from agentstream_runner.connectors.base import LLMRequest, TextDelta, ToolCallChunk, UsageChunk
from agentstream_runner.connectors.script import load_script
from agentstream_runner.connectors.scripted import ScriptedConnector

TOOLS = ("clock", "calculator")


def connector(delay_ms: float = 0, script: str | None = None, sleeps: list | None = None) -> ScriptedConnector:
    async def fake_sleep(seconds: float) -> None:
        if sleeps is not None:
            sleeps.append(seconds)

    return ScriptedConnector(
        ConnectorSettings(id="demo", type="scripted", token_delay_ms=delay_ms, script=script), sleep=fake_sleep
    )


async def collect(conn: ScriptedConnector, messages: list[ChatMessage], tools=TOOLS):
    specs = tuple(ToolSpec(name=name, description=name) for name in tools)
    return [c async for c in conn.stream(LLMRequest(messages=messages, tools=specs))]


def text_of(chunks) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


async def test_greeting_is_streamed_token_by_token():
    chunks = await collect(connector(), [ChatMessage(role="system", content="be nice"), user("hi there")])
    deltas = [c for c in chunks if isinstance(c, TextDelta)]
    expected = "Hello! I am the agentstream demo assistant. You said: hi there"
    assert "".join(d.text for d in deltas) == expected
    assert len(deltas) == len(expected.split()) > 1
    usage = chunks[-1]
    assert isinstance(usage, UsageChunk)
    assert (usage.usage.prompt_tokens, usage.usage.completion_tokens, usage.usage.llm_calls) == (4, len(deltas), 1)
    assert not any(isinstance(c, ToolCallChunk) for c in chunks)


async def test_calculation_is_a_tool_call_then_the_answer():
    conn = connector()
    first = await collect(conn, [user("please calculate 6*7")])
    assert text_of(first) == ""  # the first turn of a tool rule is only the call
    [call] = [c for c in first if isinstance(c, ToolCallChunk)]
    assert (call.name, json.loads(call.arguments), call.call_id) == ("calculator", {"expression": "6*7"}, "call_1")

    history = [
        user("please calculate 6*7"),
        ChatMessage(
            role="assistant", tool_calls=[ToolCallSpec(id=call.call_id, name=call.name, arguments=call.arguments)]
        ),
        ChatMessage(role="tool", content="42", tool_call_id=call.call_id, name="calculator"),
    ]
    second = await collect(conn, history)
    assert text_of(second) == "6*7 = 42"
    assert not any(isinstance(c, ToolCallChunk) for c in second)


async def test_time_question_calls_the_clock():
    conn = connector()
    [call] = [c for c in await collect(conn, [user("What TIME is it?")]) if isinstance(c, ToolCallChunk)]
    assert (call.name, call.arguments) == ("clock", "{}")
    answer = await collect(
        conn,
        [
            user("What TIME is it?"),
            ChatMessage(role="assistant"),
            ChatMessage(role="tool", content="2024-01-15T12:30:05+00:00"),
        ],
    )
    assert text_of(answer) == "The current time is 2024-01-15T12:30:05+00:00."


async def test_rule_is_skipped_when_its_tool_is_not_offered():
    chunks = await collect(connector(), [user("calculate 1+1")], tools=())
    assert text_of(chunks) == "Hello! I am the agentstream demo assistant. You said: calculate 1+1"


async def test_token_pacing():
    sleeps: list[float] = []
    chunks = await collect(connector(delay_ms=30, sleeps=sleeps), [user("one two three")])
    tokens = [c for c in chunks if isinstance(c, TextDelta)]
    assert sleeps == [pytest.approx(0.03)] * (len(tokens) - 1)


async def test_custom_script_with_say_and_named_groups(tmp_path):
    path = tmp_path / "script.yaml"
    path.write_text(
        "rules:\n"
        "  - match: '(?i)weather in (?P<city>\\w+)'\n"
        "    tool: weather\n"
        "    arguments: {city: '{city}', units: metric}\n"
        "    say: 'Looking up {city}...'\n"
        "    reply: 'In {city}: {result}'\n"
    )
    conn = connector(script=str(path))
    first = await collect(conn, [user("weather in Paris")], tools=("weather",))
    assert text_of(first) == "Looking up Paris..."
    [call] = [c for c in first if isinstance(c, ToolCallChunk)]
    assert json.loads(call.arguments) == {"city": "Paris", "units": "metric"}
    second = await collect(
        conn, [user("weather in Paris"), ChatMessage(role="tool", content="sunny")], tools=("weather",)
    )
    assert text_of(second) == "In Paris: sunny"
    # no rule matches: an empty answer
    assert text_of(await collect(conn, [user("hello")], tools=("weather",))) == ""


def test_invalid_scripts_are_rejected_with_the_reason(tmp_path):
    bad_regex = tmp_path / "a.yaml"
    bad_regex.write_text("rules:\n  - match: '(unclosed'\n    reply: x\n")
    with pytest.raises(ValueError, match="not a valid regex"):
        load_script(bad_regex)
    empty_rule = tmp_path / "b.yaml"
    empty_rule.write_text("rules:\n  - match: 'x'\n")
    with pytest.raises(ValueError, match="needs a tool or a reply"):
        load_script(empty_rule)
