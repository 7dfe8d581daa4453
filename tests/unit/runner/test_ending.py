"""The tool loop ending: turns, max_turns, the fallback assistant, the standard response."""

from __future__ import annotations

from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner.runner_harness import assistant, run


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
