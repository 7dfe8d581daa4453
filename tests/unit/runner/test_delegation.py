"""Delegation refused before it starts: a cycle, or a depth over the limit."""

from __future__ import annotations

from agentstream_runner.hooks import Hooks
from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner import runner_hookfns as fns
from tests.unit.runner.runner_harness import assistant, run


async def test_delegation_cycle_is_refused():
    assistants = [assistant("parent"), assistant("child")]
    hooks = {"parent": Hooks(create=fns.create_delegate), "child": Hooks(create=fns.create_cycle_back)}
    async with FakeOpenAI() as fake:
        ports = await run(fake, "x", assistants=assistants, hooks=hooks, assistant_id="parent")
        assert fake.request_count == 0
    assert ports.finished.status == "failed"
    assert ports.finished.error == "delegation refused: cycle parent → child → parent"


async def test_delegation_depth_over_five_is_refused():
    chain = [assistant(f"a{i}") for i in range(7)]

    def hop(target: str):
        return lambda inp: {"delegate": {"assistant": target}}

    hooks = {f"a{i}": Hooks(create=hop(f"a{i + 1}")) for i in range(6)}
    async with FakeOpenAI() as fake:
        ports = await run(fake, "x", assistants=chain, hooks=hooks, assistant_id="a0")
    assert ports.finished.error == "delegation refused: depth 6 is over the limit of 5"
    assert max(e.depth for e in ports.events) == 5
