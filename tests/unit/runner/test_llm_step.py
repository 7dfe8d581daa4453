"""The model call of a run against the fake server: a streamed answer, connector routing with
role overrides, capabilities deciding whether tools are sent."""

from __future__ import annotations

import asyncio

from agentstream.contracts import MessageCompleted, MessageDelta, StepCompleted
from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner.runner_harness import FakeRoles, assistant, openai_connector, run

ANSWER = "The quick brown fox jumps over the lazy dog"


async def test_streamed_answer_in_order_with_usage():
    async with FakeOpenAI() as fake:
        fake.add_turn(text=ANSWER, reasoning="short thought", usage=(12, 9))
        ports = await run(fake, "tell me")
        body = fake.requests[0].body
    text_deltas = [d.text for d in ports.of(MessageDelta) if d.kind == "text"]
    thinking = [d.text for d in ports.of(MessageDelta) if d.kind == "thinking"]
    assert "".join(text_deltas) == ANSWER and len(text_deltas) == len(ANSWER.split())
    assert "".join(thinking) == "short thought"
    assert ports.of(MessageCompleted)[0].text == ANSWER
    finished = ports.finished
    assert (finished.status, finished.text) == ("completed", ANSWER)
    assert (finished.usage.prompt_tokens, finished.usage.completion_tokens, finished.usage.llm_calls) == (12, 9, 1)
    # What the model got: the default assistant's system prompt, the user message and the tool specs.
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "tell me"
    assert {t["function"]["name"] for t in body["tools"]} == {"calculator", "clock"}
    assert body["tools"][0]["function"]["parameters"]["type"] == "object"


async def test_connector_without_tools_capability_gets_no_tools():
    async with FakeOpenAI() as fake:
        ports = await run(
            fake, "hi", connectors=[openai_connector(fake, capabilities=["streaming"])], default_connector="gpt"
        )
        assert "tools" not in fake.requests[0].body
    assert ports.finished.text == "hi"  # echo mode


async def test_role_overrides_route_the_run():
    async with FakeOpenAI() as fake:
        connectors = [openai_connector(fake, "sys"), openai_connector(fake, "mine", model="user-model")]
        helper = assistant("helper", connector="use::fast")
        common = {"assistants": [helper], "assistant_id": "helper", "connectors": connectors, "roles": {"fast": "sys"}}
        by_user = await run(fake, role_store=FakeRoles(user={"fast": "mine"}), **common)
        assert by_user.started.connector_id == "mine" and fake.requests[-1].body["model"] == "user-model"
        by_team = await run(fake, role_store=FakeRoles(team={"fast": "mine"}), **common)
        assert by_team.started.connector_id == "mine"
        by_system = await run(fake, role_store=FakeRoles(), **common)
        assert by_system.started.connector_id == "sys" and fake.requests[-1].body["model"] == "fake-model"


async def test_explicit_unknown_connector_fails_without_calling_the_model():
    async with FakeOpenAI() as fake:
        ports = await run(fake, options={"connector": "nope"}, role_store=FakeRoles(user={"default": "gpt"}))
        assert fake.request_count == 0
    assert ports.types == ["run.finished"]
    assert (ports.finished.status, ports.finished.error) == ("failed", "connector 'nope' is not configured")


async def test_no_connector_at_all():
    async with FakeOpenAI() as fake:
        ports = await run(fake, connectors=[openai_connector(fake, capabilities=["streaming"])])
        # Without tools capability and no default, nothing is usable.
    assert ports.finished.error == "connector not specified"


async def test_llm_step_records_the_connector():
    async with FakeOpenAI() as fake:
        ports = await run(fake, "hello")
    [llm] = [s for s in ports.of(StepCompleted) if s.step_type == "llm"]
    assert llm.input["connector"] == "gpt" and llm.output["usage"]["llm_calls"] == 1


async def test_cancelling_a_run_closes_the_model_connection_at_once():
    async with FakeOpenAI() as fake:
        fake.add_turn(text=" ".join(["slow"] * 100), mode="slow", token_delay_s=0.1)
        task = asyncio.create_task(run(fake, "go"))
        await fake.wait_for(lambda f: bool(f.requests) and f.requests[0].first_token_at is not None)
        await asyncio.sleep(0.15)
        task.cancel()
        ports = await task  # an interrupt is a normal ending of the pipeline
        # The stream takes 10 s: the server seeing the connection dropped before its end is the cancel's doing.
        await fake.wait_for(lambda f: f.requests[0].closed_early, timeout=5.0)
        request = fake.requests[0]
    assert request.closed_early and request.completed_at is None
    assert ports.finished.status == "interrupted"
