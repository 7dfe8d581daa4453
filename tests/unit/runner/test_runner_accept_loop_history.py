"""Acceptance 8 (tool loop) and 4 (history) against the fake server."""

from __future__ import annotations

import pytest

from agentstream.contracts import ChatMessage
from agentstream.testing.fake_openai import FakeOpenAI
from agentstream_runner.history import StoredMessage, drop_overlap, history_size, replay, skips_history
from tests.unit.runner.runner_harness import FakeHistory, assistant, run


async def test_tool_loop_two_turns_then_an_answer():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "2*3"})], usage=(1, 1))
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})], usage=(1, 1))
        fake.add_turn(text="42", usage=(1, 1))
        ports = await run(fake, "compute")
        assert all("tools" in r.body for r in fake.requests)
    assert len(ports.tool_requests) == 2
    assert (ports.finished.text, ports.finished.usage.llm_calls) == ("42", 3)


async def test_max_turns_reached_then_the_fallback_assistant_answers():
    looping = assistant("looper", tool_loop={"max_turns": 2}, fallback="rescuer")
    rescuer = assistant("rescuer", system=["Answer from what you have."], tools=[])
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1+1"})], usage=(1, 1))
        fake.add_turn(tool_calls=[("calculator", {"expression": "2+2"})], usage=(1, 1))
        fake.add_turn(text="rescued: 4", usage=(1, 1))
        ports = await run(fake, "loop", assistants=[looping, rescuer], assistant_id="looper")
        fallback_request = fake.requests[2].body
    roles = [m["role"] for m in fallback_request["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert fallback_request["messages"][0]["content"] == "Answer from what you have."
    assert "tools" not in fallback_request
    finished = ports.finished
    assert (finished.status, finished.text, finished.usage.llm_calls) == ("completed", "rescued: 4", 3)
    assert {e.depth for e in ports.events} == {0, 1}


async def test_failing_fallback_falls_back_to_the_standard_response():
    looping = assistant("looper", tool_loop={"max_turns": 1}, fallback="broken")
    broken = assistant("broken", connector="missing")
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1+1"})])
        fake.add_turn(text="standard: 2")
        ports = await run(fake, "loop", assistants=[looping, broken], assistant_id="looper")
        assert "tools" not in fake.requests[1].body
    assert (ports.finished.status, ports.finished.text) == ("completed", "standard: 2")


async def test_loop_disabled_gives_the_standard_response():
    once = assistant("once", tool_loop={"enabled": False})
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1+1"})])
        fake.add_turn(text="2", tool_calls=[("calculator", {"expression": "ignored"})])
        ports = await run(fake, "once", assistants=[once], assistant_id="once")
        assert "tools" not in fake.requests[1].body and fake.request_count == 2
    assert len(ports.tool_requests) == 1 and ports.finished.text == "2"


# -- history -------------------------------------------------------------------------


def msgs(*pairs: tuple[str, str]) -> list[ChatMessage]:
    return [ChatMessage(role=r, content=c) for r, c in pairs]


@pytest.mark.parametrize(
    ("history", "incoming", "kept"),
    [
        ([("user", "a"), ("assistant", "b")], [("user", "c")], [("user", "c")]),  # none
        ([("user", "a"), ("assistant", "b")], [("assistant", "b"), ("user", "c")], [("user", "c")]),  # partial
        ([("user", "a"), ("assistant", "b")], [("user", "a"), ("assistant", "b")], []),  # full
        ([("user", "a"), ("assistant", "b")], [("user", "a"), ("assistant", "b"), ("user", "c")], [("user", "c")]),
        ([("user", "x")], [("assistant", "x")], [("assistant", "x")]),  # same content, other role
    ],
)
def test_overlap_dropping(history, incoming, kept):
    assert drop_overlap(msgs(*history), msgs(*incoming)) == msgs(*kept)


def test_history_size_priority_and_skip():
    assert history_size({"history_size": 3}, 7) == 3
    assert history_size({}, 7) == 7
    assert history_size({}, None) == 20
    assert history_size({"history_size": "lots"}, None) == 20
    assert skips_history({"skip": ["history"]}) and skips_history({"skip.history": True})
    assert not skips_history({"skip": ["other"]})


def test_tool_rows_are_replayed_as_summaries():
    rows = [
        StoredMessage("user", "q"),
        StoredMessage("tool", "x" * 500, name="calculator"),
        StoredMessage("assistant", "a"),
        StoredMessage("system", "ignored"),
    ]
    replayed = replay(rows)
    assert [m.role for m in replayed] == ["user", "assistant", "assistant"]
    assert replayed[1].content.startswith("[tool calculator returned: xxx") and len(replayed[1].content) < 250


async def test_history_is_loaded_and_the_overlap_dropped():
    history = FakeHistory([("user", "earlier"), ("assistant", "reply"), ("user", "again")])
    async with FakeOpenAI() as fake:
        ports = await run(
            fake,
            "ignored",
            history=history,
            options={"messages": [{"role": "user", "content": "again"}, {"role": "user", "content": "new"}]},
        )
        sent = [(m["role"], m["content"]) for m in fake.requests[0].body["messages"]]
    assert sent[1:] == [("user", "earlier"), ("assistant", "reply"), ("user", "again"), ("user", "new")]
    assert [(m.role, m.content) for m in ports.started.input] == [("user", "new")]  # only the new input is stored
    assert history.limits == [20]


async def test_history_size_request_over_assistant():
    short = assistant("short", history_size=2)
    history = FakeHistory([("user", "1"), ("assistant", "2"), ("user", "3")])
    async with FakeOpenAI() as fake:
        await run(fake, "q", history=history, assistants=[short], assistant_id="short")
        await run(fake, "q", history=history, assistants=[short], assistant_id="short", options={"history_size": 1})
        assert [m["content"] for m in fake.requests[0].body["messages"]] == ["2", "3", "q"]
    assert history.limits == [2, 1]


async def test_skip_history_and_failing_history():
    history = FakeHistory([("user", "old")])
    broken = FakeHistory(fail=True)
    async with FakeOpenAI() as fake:
        await run(fake, "q", history=history, options={"skip": ["history"]})
        ports = await run(fake, "q2", history=broken)
        assert [m["role"] for m in fake.requests[0].body["messages"]] == ["system", "user"]
        assert [m["content"] for m in fake.requests[1].body["messages"][1:]] == ["q2"]
    assert history.limits == [] and broken.limits == [20]
    assert ports.finished.status == "completed"
