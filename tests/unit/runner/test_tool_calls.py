"""Tool calls and their retries, against the fake server and the real tool code."""

from __future__ import annotations

import json

from agentstream.contracts import ToolCall, ToolCallSpec, ToolResult
from agentstream.contracts.limits import MAX_NAME
from agentstream_runner.assistants import BUILTIN_TOOLS
from agentstream_runner.llm_step import distinct_call_ids
from agentstream_runner.tool_calls import RETRY_INSTRUCTION
from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner.runner_harness import assistant, run


async def test_tool_call_succeeds_and_the_model_answers_from_it():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="It is 42.")
        ports = await run(fake, "what is 6*7?")
        second = fake.requests[1].body
    [request] = ports.tool_requests
    assert (request.tool, json.loads(request.arguments), request.attempt) == ("calculator", {"expression": "6*7"}, 1)
    # What the executor checks: the assistant's tools list, and no approval (calculator needs none here).
    assert (request.offered, request.approval_id) == (list(BUILTIN_TOOLS), None)  # the default assistant's
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][3] == {"role": "tool", "content": "42", "tool_call_id": "call_1"}
    assert "tools" in second  # the loop offers tools again
    finished = ports.finished
    assert (finished.status, finished.text, finished.usage.llm_calls) == ("completed", "It is 42.", 2)


async def test_each_request_names_the_seq_of_its_tool_call_event():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1+1"}), ("clock", {})])
        fake.add_turn(text="done")
        ports = await run(fake, "two tools")
    seqs = {c.call_id: c.seq for c in ports.of(ToolCall)}
    assert len(set(seqs.values())) == 2  # two events, two seqs
    assert {r.call_id: r.call_seq for r in ports.tool_requests} == seqs


async def test_retryable_error_then_corrected_call_with_the_exact_retry_messages():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expr": "2+2"})])  # schema violation: retryable
        fake.add_turn(tool_calls=[("calculator", {"expression": "2+2"})])
        fake.add_turn(text="4")
        ports = await run(fake, "2+2?")
        retry = fake.requests[1].body["messages"]
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "tool", "user"]
    assert retry[2]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": '{"expr": "2+2"}'}}
    ]
    assert retry[3]["tool_call_id"] == "call_1"
    assert retry[3]["content"].startswith("error: invalid arguments for calculator:")
    assert "expression" in retry[3]["content"]  # says what was wrong
    assert retry[4]["content"] == RETRY_INSTRUCTION.format(tools="clock, calculator")
    assert [c.attempt for c in ports.of(ToolCall)] == [1, 2]
    assert [r.retryable for r in ports.of(ToolResult)] == [True, False]
    assert (ports.finished.status, ports.finished.text, ports.finished.usage.llm_calls) == ("completed", "4", 3)


async def test_three_retryable_failures_fail_the_run_clearly():
    async with FakeOpenAI() as fake:
        for _ in range(3):
            fake.add_turn(tool_calls=[("calculater", {"expression": "1"})])  # not offered: unknown, retryable
        fake.add_turn(text="never asked")
        ports = await run(fake, "go")
        assert fake.request_count == 3 and fake.pending_turns == 1
    finished = ports.finished
    assert finished.status == "failed"
    assert finished.error.startswith("tool calls still failing after 3 attempts: calculater: unknown tool")
    assert "available tools: calculator, clock" in finished.error
    # Refused by the runner: not one reached an executor.
    assert len(ports.tool_requests) == 0 and finished.usage.llm_calls == 3


async def test_non_retryable_error_goes_back_once_and_the_model_answers_without_tools():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1/0"})])
        fake.add_turn(text="You cannot divide by zero.")
        ports = await run(fake, "1/0?")
        answer_request = fake.requests[1].body
    assert "tools" not in answer_request
    assert answer_request["messages"][-1] == {
        "role": "tool",
        "content": "error: division by zero",
        "tool_call_id": "call_1",
    }
    assert [r.retryable for r in ports.of(ToolResult)] == [False]
    assert (ports.finished.status, ports.finished.text) == ("completed", "You cannot divide by zero.")


async def test_on_tool_error_fail_makes_the_run_fail():
    strict = assistant("strict", on_tool_error="fail")
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1/0"})])
        ports = await run(fake, "1/0?", assistants=[strict], assistant_id="strict")
        assert fake.request_count == 1
    assert (ports.finished.status, ports.finished.error) == (
        "failed",
        "tool calls failed: calculator: division by zero",
    )


async def test_plain_text_answer_on_retry_is_accepted():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("clock", {"timezone": "Mars/Base"})])  # tool rejects the value: retryable
        fake.add_turn(text="I do not know that time zone.")
        ports = await run(fake, "time on Mars?")
        assert fake.request_count == 2
    assert (ports.finished.status, ports.finished.text) == ("completed", "I do not know that time zone.")


async def test_parallel_calls_of_one_completion():
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1+1"}), ("calculator", {"expression": "2+2"})])
        fake.add_turn(text="2 and 4")
        ports = await run(fake, "both")
        tools = [m for m in fake.requests[1].body["messages"] if m["role"] == "tool"]
    assert [(t["tool_call_id"], t["content"]) for t in tools] == [("call_1", "2"), ("call_2", "4")]
    assert ports.finished.text == "2 and 4"


async def test_a_call_id_the_model_repeats_in_a_later_turn_is_made_distinct():
    # The fake numbers calls per answer (`call_1` in each): the executor claims `run_id:call_id`
    # once, so the second call must not reach it under the first one's key (it would be answered
    # with the first one's result, or wait for it while that call is still running).
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1+1"})])
        fake.add_turn(tool_calls=[("calculator", {"expression": "2*3"})])
        fake.add_turn(text="2 and 6")
        ports = await run(fake, "two sums, one after the other")
        last = fake.requests[2].body["messages"]
    assert [r.call_id for r in ports.tool_requests] == ["call_1", "call_1-2"]
    assert len({r.idempotency_key for r in ports.tool_requests}) == 2
    # What the model sees agrees: each tool message answers the call of that id, with its own result.
    calls = [m["tool_calls"][0]["id"] for m in last if m["role"] == "assistant"]
    answers = [(m["tool_call_id"], m["content"]) for m in last if m["role"] == "tool"]
    assert calls == ["call_1", "call_1-2"] and answers == [("call_1", "2"), ("call_1-2", "6")]
    assert ports.finished.text == "2 and 6"


def test_distinct_call_ids_suffixes_every_repeat_and_keeps_the_length_limit():
    def spec(call_id: str) -> ToolCallSpec:
        return ToolCallSpec(id=call_id, name="clock")

    made = distinct_call_ids([spec("a"), spec("a"), spec("b"), spec("a-2")], taken=["a", "b", "a-3"])
    assert [c.id for c in made] == ["a-2", "a-4", "b-2", "a-2-2"]
    fresh = [spec("x"), spec("y")]
    assert distinct_call_ids(fresh, taken=[]) == fresh  # nothing repeated: the very same calls
    long = "c" * MAX_NAME
    [renamed] = distinct_call_ids([spec(long)], taken=[long])
    assert renamed.id == "c" * (MAX_NAME - 2) + "-2"
