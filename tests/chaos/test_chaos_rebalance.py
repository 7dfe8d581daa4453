"""A second runner joins the group: the first one's runs end `failed(reason=rebalanced)`.

aiokafka rebalances eagerly (every partition is revoked, then reassigned), so every
run of the first runner is stopped; with `resume.auto` persistence would resume them
on their partition's new owner (see test_chaos_runner_kill for the resume itself).
"""

from __future__ import annotations

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream.testing.fake_openai import FakeOpenAI
from agentstream.testing.kafka import RawRecord, produce_raw, read_until
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap

pytestmark = pytest.mark.chaos

KEY = "web:rebalance"


def endings(records: list[RawRecord]) -> list[RunFinished]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if b'"run.finished"' in (r.value or b"")]
    return [e for e in events if isinstance(e, RunFinished)]


async def test_revoked_partitions_end_their_runs_as_rebalanced(settings_factory, topics_created):
    async with FakeOpenAI() as fake:
        fake.add_turn(text=" ".join(["slow"] * 200), token_delay_s=0.1)
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
        )
        first, second = runner_bootstrap(settings), runner_bootstrap(settings)
        bootstrap, t = settings.kafka.bootstrap_servers, first.topics
        start = StartRun(
            run_id="run-rb-1",
            conversation_key=KEY,
            assistant_id="default",
            user=User(id="u1"),
            text="go",
            reply_target=ReplyTarget(platform="web", chat_id="rebalance"),
        )
        async with ServiceHost([first], "127.0.0.1", {first.name: free_port()}):
            await produce_raw(bootstrap, t.runs, start.to_json(), key=KEY.encode())
            await read_until(bootstrap, t.events, lambda rs: any(b'"message.delta"' in (r.value or b"") for r in rs))
            async with ServiceHost([second], "127.0.0.1", {second.name: free_port()}):
                records = await read_until(bootstrap, t.events, lambda rs: len(endings(rs)) >= 1, timeout=30)
                [end] = endings(records)
                assert (end.root_run_id, end.status, end.reason) == (start.run_id, "failed", "rebalanced")
                assert end.error == "run stopped: rebalanced"
                assert fake.requests[0].closed_early  # the model stream was cancelled, not left running
