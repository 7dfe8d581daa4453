"""agent-runner's stop on the real broker: a drain while the grace period lasts, then the cut,
counted in `agentstream_shutdown_cut_total`.

The process-level proof (SIGTERM to `agentstream serve`, the run completes whole) is
tests/chaos/test_chaos_runner_drain.py; here the parts of the stop, in one process.
"""

from __future__ import annotations

import asyncio

import httpx

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import RawRecord, produce_raw, read_until

KEY = "web:drain"
TEXT = " ".join(f"w{i}" for i in range(20))


def endings(records: list[RawRecord]) -> list[RunFinished]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if b'"run.finished"' in (r.value or b"")]
    return [e for e in events if isinstance(e, RunFinished)]


def has_delta(records: list[RawRecord]) -> bool:
    return any(b'"message.delta"' in (r.value or b"") for r in records)


def start_run(run_id: str) -> StartRun:
    return StartRun(
        run_id=run_id,
        conversation_key=KEY,
        assistant_id="default",
        user=User(id="u1"),
        text="go",
        reply_target=ReplyTarget(platform="web", chat_id="drain"),
    )


def cut(runner, what: str) -> float | None:
    return runner.registry.get_sample_value("agentstream_shutdown_cut_total", {"service": runner.name, "what": what})


async def _stop_mid_run(settings_factory, grace_s: float, token_delay_s: float):
    async with FakeOpenAI() as fake:
        fake.add_turn(text=TEXT, token_delay_s=token_delay_s)
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            shutdown={"grace_s": grace_s},
        )
        runner = runner_bootstrap(settings)
        bootstrap, t = settings.kafka.bootstrap_servers, runner.topics
        port = free_port()
        host = ServiceHost([runner], "127.0.0.1", {runner.name: port})
        await host.start()
        try:
            start = start_run("run-drain-in-process")
            await produce_raw(bootstrap, t.runs, start.to_json(), key=KEY.encode())
            await read_until(bootstrap, t.events, has_delta, timeout=30)
            stopping = asyncio.create_task(host.stop())
            async with httpx.AsyncClient(timeout=5) as http:  # ready until the drain begins, then not
                while (ready := await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                    pass
            await stopping
        finally:
            await host.stop()
        records = await read_until(bootstrap, t.events, lambda rs: len(endings(rs)) >= 1, timeout=10)
        return runner, ready, endings(records), fake.requests


async def test_a_run_within_the_grace_period_completes_and_nothing_is_cut(settings_factory, topics_created):
    runner, ready, [end], requests = await _stop_mid_run(settings_factory, grace_s=30, token_delay_s=0.05)
    assert ready.status_code == 503 and ready.json()["reasons"]["broker"] == "draining"
    assert (end.status, end.text) == ("completed", TEXT)
    assert not requests[0].closed_early
    assert cut(runner, "runs") is None  # no series: nothing was cut


async def test_a_run_past_the_grace_period_is_cut_and_counted(settings_factory, topics_created):
    runner, _, [end], requests = await _stop_mid_run(settings_factory, grace_s=0.5, token_delay_s=0.5)
    assert (end.status, end.reason) == ("interrupted", "shutdown")
    assert requests[0].closed_early
    assert cut(runner, "runs") == 1
