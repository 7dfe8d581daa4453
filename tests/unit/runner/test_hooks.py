"""Create and Next hooks against the fake server."""

from __future__ import annotations

from agentstream.contracts import RunFinished, RunStarted, StepCompleted
from agentstream_runner.hooks import Hooks
from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner import runner_hookfns as fns
from tests.unit.runner.runner_harness import assistant, openai_connector, run


def parent(**hooks) -> tuple[list, dict]:
    return [assistant("parent"), assistant("child", system=["You are the child."])], {"parent": Hooks(**hooks)}


async def test_create_hook_changes_sampling_options():
    assistants, hooks = parent(create=fns.create_sampling)
    async with FakeOpenAI() as fake:
        ports = await run(
            fake, "hi", assistants=assistants, hooks=hooks, assistant_id="parent", options={"temperature": 0.9}
        )
        body = fake.requests[0].body
    assert (body["temperature"], body["max_tokens"]) == (0.1, 33)
    assert fns.SEEN[-1].options["temperature"] == 0.9  # the hook saw the merged request options
    assert ports.finished.status == "completed"


async def test_create_hook_replaces_messages():
    assistants, hooks = parent(create=fns.create_replace_messages)
    async with FakeOpenAI() as fake:
        ports = await run(fake, "old", assistants=assistants, hooks=hooks, assistant_id="parent")
        assert fake.requests[0].body["messages"] == [
            {"role": "system", "content": "replaced"},
            {"role": "user", "content": "new question"},
        ]
    assert ports.finished.text == "new question"


async def test_create_hook_changes_connector_and_capabilities_follow():
    assistants, hooks = parent(create=fns.create_connector)
    async with FakeOpenAI() as fake:
        connectors = [
            openai_connector(fake),
            openai_connector(fake, "plain", capabilities=["streaming"], model="plain-model"),
        ]
        await run(fake, "hi", assistants=assistants, hooks=hooks, assistant_id="parent", connectors=connectors)
        body = fake.requests[0].body
    assert body["model"] == "plain-model" and "tools" not in body


async def test_create_hook_delegates_and_the_model_of_the_parent_is_never_called():
    assistants, hooks = parent(create=fns.create_delegate)
    async with FakeOpenAI() as fake:
        fake.add_turn(text="child answer", usage=(4, 2))
        ports = await run(fake, "question", assistants=assistants, hooks=hooks, assistant_id="parent")
        assert fake.request_count == 1  # only the child's call
        child_request = fake.requests[0].body["messages"]
    assert child_request[0] == {"role": "system", "content": "You are the child."}
    assert child_request[-1]["content"] == "question"
    assert len(ports.of(RunFinished)) == 1 and len(ports.of(RunStarted)) == 1
    finished = ports.finished
    assert (finished.status, finished.text, finished.usage.llm_calls) == ("completed", "child answer", 1)
    child_events = [e for e in ports.events if e.run_id != "run-1"]
    assert child_events and all(
        e.parent_run_id == "run-1" and e.depth == 1 and e.root_run_id == "run-1" for e in child_events
    )
    assert {s.step_type for s in ports.of(StepCompleted) if s.run_id == "run-1"} == {"hook_create", "delegate"}


async def test_next_hook_returning_nothing_is_the_standard_response():
    assistants, hooks = parent(next=fns.next_nothing)
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "3*3"})])
        fake.add_turn(text="nine")
        ports = await run(fake, "3*3", assistants=assistants, hooks=hooks, assistant_id="parent")
        assert "tools" not in fake.requests[1].body  # standard response: answer from the results
    seen = fns.SEEN[-1]
    assert [r.content for r in seen.tool_results] == ["9"] and seen.error is None
    assert seen.tool_calls[0].name == "calculator"
    assert (ports.finished.text, ports.finished.data) == ("nine", {})


async def test_next_hook_data_is_attached_to_the_result():
    assistants, hooks = parent(next=fns.next_data)
    async with FakeOpenAI() as fake:
        fake.add_turn(text="plain")
        ports = await run(fake, "x", assistants=assistants, hooks=hooks, assistant_id="parent")
    assert (ports.finished.text, ports.finished.data) == ("plain", {"score": 7, "results": 0})


async def test_next_hook_delegates():
    assistants, hooks = parent(next=fns.next_delegate)
    async with FakeOpenAI() as fake:
        fake.add_turn(text="parent draft", usage=(5, 2))
        fake.add_turn(text="child final", usage=(7, 3))
        ports = await run(fake, "x", assistants=assistants, hooks=hooks, assistant_id="parent")
        assert fake.requests[1].body["messages"][-1] == {"role": "user", "content": "child, please answer"}
    finished = ports.finished
    assert finished.text == "child final"
    # Usage summed over parent and child.
    assert (finished.usage.prompt_tokens, finished.usage.completion_tokens, finished.usage.llm_calls) == (12, 5, 2)


async def test_next_hook_that_raises_fails_the_run_with_its_error():
    assistants, hooks = parent(next=fns.next_raises)
    async with FakeOpenAI() as fake:
        ports = await run(fake, "x", assistants=assistants, hooks=hooks, assistant_id="parent")
    assert (ports.finished.status, ports.finished.error) == ("failed", "next hook failed: ValueError: hook exploded")


async def test_next_hook_sees_tool_errors_and_nothing_means_the_model_answers_from_them():
    assistants, hooks = parent(next=fns.next_nothing)
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "1/0"})])
        fake.add_turn(text="Division by zero is undefined.")
        ports = await run(fake, "1/0", assistants=assistants, hooks=hooks, assistant_id="parent")
    seen = fns.SEEN[-1]
    assert seen.error == "calculator: division by zero" and not seen.tool_results[0].ok
    assert (ports.finished.status, ports.finished.text) == ("completed", "Division by zero is undefined.")


async def test_next_hook_can_rescue_exhausted_retries_by_delegating():
    assistants, hooks = parent(next=fns.next_delegate)
    async with FakeOpenAI() as fake:
        for _ in range(3):
            fake.add_turn(tool_calls=[("nope", {})])
        fake.add_turn(text="rescued by the child")
        ports = await run(fake, "x", assistants=assistants, hooks=hooks, assistant_id="parent")
    assert (ports.finished.status, ports.finished.text) == ("completed", "rescued by the child")
    assert ports.finished.usage.llm_calls == 4
