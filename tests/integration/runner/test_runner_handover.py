"""A rebalance while a run is between a model call and its tool result: the run finishes on its
runner, its tool result read on the side while the partition is revoked (handover.ResultsReader).

Without that reader the result would go to the group's consumer, which hands nothing out during
a rebalance: the run would wait until `runner.handover_s` ran out and end `failed(rebalanced)`.
"""

from __future__ import annotations

import asyncio

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, ToolResult, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as tools_bootstrap

KEY = "web:handover"
FIRST = " ".join(f"w{i}" for i in range(30))


def events_of(records: list[RawRecord]) -> list[object]:
    return [RunEventAdapter.validate_json(r.value) for r in records if r.value]


def ended(records: list[RawRecord]) -> bool:
    return any(b'"run.finished"' in (r.value or b"") for r in records)


async def test_a_tool_result_reaches_a_run_being_handed_over(settings_factory, topics_created):
    async with FakeOpenAI() as fake:
        fake.add_turn(text=FIRST, tool_calls=[("calculator", {"expression": "6*7"})], token_delay_s=0.1)
        fake.add_turn(text="It is 42.")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
        )
        first, second, tools = runner_bootstrap(settings), runner_bootstrap(settings), tools_bootstrap(settings)
        routed: list[str] = []  # what the side reader handed to the finishing runs
        route = first._route_handed

        def spy(value: bytes) -> None:
            routed.append(value.decode("utf-8", "replace"))
            route(value)

        first._route_handed = spy  # type: ignore[method-assign]
        # The executor starts only once the handover has begun: its result then cannot reach the run
        # through the group's consumer before the rebalance (under load the join came after it).
        handing = asyncio.Event()
        hand_over = first._hand_over

        async def spied_hand_over(partitions: set[int]) -> None:
            handing.set()
            await hand_over(partitions)

        first._hand_over = spied_hand_over  # type: ignore[method-assign]
        start = StartRun(
            run_id="run-handover",
            conversation_key=KEY,
            assistant_id="default",
            user=User(id="u1"),
            text="what is 6*7?",
            reply_target=ReplyTarget(platform="web", chat_id="handover"),
        )
        bootstrap, t = settings.kafka.bootstrap_servers, first.topics
        async with ServiceHost([first], "127.0.0.1", {first.name: free_port()}):
            await produce_raw(bootstrap, t.runs, start.to_json(), key=KEY.encode())
            await read_until(bootstrap, t.events, lambda rs: any(b'"message.delta"' in (r.value or b"") for r in rs))
            second_host = ServiceHost([second], "127.0.0.1", {second.name: free_port()})
            tools_host = ServiceHost([tools], "127.0.0.1", {tools.name: free_port()})
            try:
                joining = asyncio.create_task(second_host.start())
                await asyncio.wait_for(handing.wait(), timeout=60)
                await tools_host.start()
                records = await read_until(bootstrap, t.events, ended, timeout=60)
                await joining
            finally:
                await tools_host.stop()
                await second_host.stop()
    [end] = [e for e in events_of(records) if isinstance(e, RunFinished)]
    assert (end.status, end.reason, end.text) == ("completed", None, "It is 42.")
    [result] = [e for e in events_of(records) if isinstance(e, ToolResult)]
    assert result.ok
    assert any('"call_id"' in r and result.call_id in r for r in routed), routed  # via the side reader
    assert fake.request_count == 2 and not fake.requests[0].closed_early
