"""A second runner joins the group while the first streams an answer: the answer completes whole.

aiokafka rebalances eagerly (every partition is revoked, then reassigned), so every run of the
first runner is on a partition that may move. Its runs finish on it before the partitions move
(`runner.handover_s`, agent_runner/handover.py): no `rebalanced` ending, no resume, the model
stream never closed early. A message for the same conversation sent during the handover starts
only after that run has ended, so the conversation still has one writer, in order.
"""

from __future__ import annotations

import asyncio

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, RunStarted, StartRun, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until

pytestmark = pytest.mark.chaos

KEY = "web:rebalance"
SLOW = " ".join(f"slow{i}" for i in range(80))


def endings(records: list[RawRecord]) -> list[RunFinished]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if b'"run.finished"' in (r.value or b"")]
    return [e for e in events if isinstance(e, RunFinished)]


def start_run(run_id: str) -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=KEY,
        assistant_id="default",
        user=User(id="u1"),
        text="go",
        reply_target=ReplyTarget(platform="web", chat_id="rebalance"),
    )


async def test_a_run_on_a_revoked_partition_finishes_whole_before_the_partition_moves(settings_factory, topics_created):
    async with FakeOpenAI() as fake:
        fake.add_turn(text=SLOW, token_delay_s=0.1)
        fake.add_turn(text="the next answer")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
        )
        first, second = runner_bootstrap(settings), runner_bootstrap(settings)
        bootstrap, t = settings.kafka.bootstrap_servers, first.topics
        running, after = start_run("run-rb-1"), start_run("run-rb-2")
        handed_over: list[int] = []  # conversations with work on the partitions each revocation took
        hand_over = first._hand_over

        async def spy(partitions: set[int]) -> None:
            handed_over.append(len(first.conversations.of_partitions(partitions)))
            await hand_over(partitions)

        first._hand_over = spy  # type: ignore[method-assign]
        async with ServiceHost([first], "127.0.0.1", {first.name: free_port()}):
            await produce_raw(bootstrap, t.runs, running.to_json(), key=KEY.encode())
            await read_until(bootstrap, t.events, lambda rs: any(b'"message.delta"' in (r.value or b"") for r in rs))
            second_host = ServiceHost([second], "127.0.0.1", {second.name: free_port()})
            joining = asyncio.create_task(second_host.start())
            try:
                await asyncio.sleep(1.0)  # the rebalance has begun: the first runner is handing over
                await produce_raw(bootstrap, t.runs, after.to_json(), key=KEY.encode())
                records = await read_until(bootstrap, t.events, lambda rs: len(endings(rs)) >= 2, timeout=60)
                await joining
            finally:
                await second_host.stop()
    assert handed_over and handed_over[0] == 1  # the rebalance came while the run was streaming
    first_end, second_end = endings(records)
    assert (first_end.root_run_id, first_end.status, first_end.reason) == (running.run_id, "completed", None)
    assert first_end.text == SLOW
    assert (second_end.root_run_id, second_end.status) == (after.run_id, "completed")
    # One writer, in order: the second run started only once the first had finished.
    events = [RunEventAdapter.validate_json(r.value) for r in records if r.partition == records[0].partition]
    order = [(type(e).__name__, e.root_run_id) for e in events if isinstance(e, RunStarted | RunFinished)]
    assert order == [
        ("RunStarted", running.run_id),
        ("RunFinished", running.run_id),
        ("RunStarted", after.run_id),
        ("RunFinished", after.run_id),
    ]
    assert fake.request_count == 2 and not fake.requests[0].closed_early  # nothing asked twice, nothing cut
