"""Membership changes of agent-runner under traffic, while 20 conversations stream answers: a
rolling restart of two replicas, each replaced one at a time (the new one starts, then the old
one gets SIGTERM), and a scale-out 1 → 3 followed by a scale-in 3 → 1.

Every replacement is two rebalances (a join, then a leave) and a drain: the runs on partitions
that move finish on the runner that has them (`runner.handover_s`), a stopped runner lets its runs
finish (`shutdown.grace_s`). The goal, asserted: every answer whole, none cut, none lost, none
twice, no model request repeated. The table is printed (`-s`) for the record.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, RunStarted, StartRun, User
from agentstream.kafka import create_topics, free_port
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from tests.chaos.processes import ServiceProcess, service_env

pytestmark = pytest.mark.chaos

CONVERSATIONS = 20
WORDS = 30  # each answer echoes the question: 30 tokens, 0.3 s apart (9 s: long enough to meet a rebalance)
TOKEN_DELAY_S = 0.3


def question(i: int) -> str:
    return " ".join(f"c{i}w{j}" for j in range(WORDS))


def start_run(i: int) -> StartRun:
    return StartRun(
        run_id=f"run-roll-{i}",
        conversation_key=f"web:roll-{i}",
        assistant_id="default",
        user=User(id=f"u{i}"),
        text=question(i),
        reply_target=ReplyTarget(platform="web", chat_id=f"roll-{i}"),
    )


def run_events(records: list[RawRecord]) -> list[object]:
    wanted = (b'"run.started"', b'"run.finished"')
    return [RunEventAdapter.validate_json(r.value) for r in records if any(w in (r.value or b"") for w in wanted)]


def table(events: list[object], starts: list[StartRun], requests: list[object]) -> dict[str, int]:
    ends = [e for e in events if isinstance(e, RunFinished) and e.run_id == e.root_run_id]
    begun = Counter(e.root_run_id for e in events if isinstance(e, RunStarted))
    ended = Counter(e.root_run_id for e in ends)
    by_run = {e.root_run_id: e for e in ends}
    asked = Counter(json.dumps(r.messages, sort_keys=True) for r in requests)  # type: ignore[attr-defined]
    return {
        "runs": len(starts),
        "whole, no cut marker": sum(
            1
            for s in starts
            if (e := by_run.get(s.run_id)) is not None
            and e.status == "completed"
            and e.text == s.text
            and ended[s.run_id] == 1
        ),
        "cut (rebalanced/shutdown)": sum(1 for e in ends if e.reason in ("rebalanced", "shutdown")),
        "resumed": sum(max(0, n - 1) for n in begun.values()),
        "duplicates": sum(max(0, n - 1) for n in ended.values()),
        "lost": sum(1 for s in starts if s.run_id not in ended),
        "LLM requests repeated": sum(n - 1 for n in asked.values()),
    }


@pytest.mark.timeout(240)
async def test_rolling_restart_of_agent_runner_under_traffic_cuts_nothing(kafka_bootstrap, topic_prefix, tmp_path):
    async with FakeOpenAI(echo_token_delay_s=TOKEN_DELAY_S) as fake:
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{tmp_path / 'roll.db'}",
            connectors=connectors,
            default_connector="fake",
            kafka={"partitions": 4},
            shutdown={"grace_s": 30.0},
        )
        await create_topics(settings.kafka)
        env = service_env(settings, connectors=connectors, default_connector="fake", runner__coalesce_ms="10")
        old = [ServiceProcess("agent-runner", env, free_port(), tmp_path, f"old{i}") for i in range(2)]
        new = [ServiceProcess("agent-runner", env, free_port(), tmp_path, f"new{i}") for i in range(2)]
        starts = [start_run(i) for i in range(CONVERSATIONS)]
        bootstrap, runs, events = settings.kafka.bootstrap_servers, f"{topic_prefix}runs", f"{topic_prefix}events"

        waves = iter([starts[i : i + CONVERSATIONS // 4] for i in range(0, CONVERSATIONS, CONVERSATIONS // 4)])

        async def send(wave: list[StartRun]) -> None:
            for s in wave:
                await produce_raw(bootstrap, runs, s.to_json(), key=s.conversation_key.encode())

        try:
            await asyncio.gather(*(p.start() for p in old))
            for before, after in zip(old, new, strict=True):  # one replica at a time, as a Deployment rolls
                await send(next(waves))  # streaming when the new replica joins: a rebalance
                await asyncio.sleep(1.0)
                await after.start()
                await send(next(waves))  # streaming when the old one gets SIGTERM: a drain, then a rebalance
                await asyncio.sleep(1.0)
                before.sigterm()
                assert await before.exited(timeout=45) == 0
            records = await read_until(
                bootstrap,
                events,
                lambda rs: sum(isinstance(e, RunFinished) for e in run_events(rs)) >= CONVERSATIONS,
                timeout=90,
            )
        finally:
            for p in (*old, *new):
                p.stop()
        figures = table(run_events(records), starts, fake.requests)
    print_endings_not_single(records)  # shown when the report below fails: which endings, from where
    report("rolling restart of agent-runner (2 replicas, 20 conversations)", figures)


def print_endings_not_single(records: list[RawRecord]) -> None:
    """Every ending of a run that has other than one, as read: partition, offset, seq, epoch, status,
    reason, error (a second ending's origin, the runner's own or a lost-run ending, is in these)."""
    endings: dict[str, list[str]] = {}
    for r in records:
        if r.value and b'"run.finished"' in r.value:
            e = RunEventAdapter.validate_json(r.value)
            if isinstance(e, RunFinished) and e.run_id == e.root_run_id:
                endings.setdefault(e.root_run_id, []).append(
                    f"p{r.partition}@{r.offset} seq={e.seq} epoch={e.epoch} {e.status}/{e.reason} "
                    f"error={e.error!r} ts={e.ts.isoformat()}"
                )
    for run_id, seen in endings.items():
        if len(seen) != 1:
            print(f"\n{run_id}: " + " | ".join(seen))


def report(title: str, figures: dict[str, int]) -> None:
    print(f"\n{title}:")
    for name, value in figures.items():
        print(f"  {name:<28} {value}")
    assert figures == {
        "runs": CONVERSATIONS,
        "whole, no cut marker": CONVERSATIONS,
        "cut (rebalanced/shutdown)": 0,
        "resumed": 0,
        "duplicates": 0,
        "lost": 0,
        "LLM requests repeated": 0,
    }


@pytest.mark.timeout(240)
async def test_scale_out_then_in_of_agent_runner_under_traffic_cuts_nothing(kafka_bootstrap, topic_prefix, tmp_path):
    async with FakeOpenAI(echo_token_delay_s=TOKEN_DELAY_S) as fake:
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{tmp_path / 'scale.db'}",
            connectors=connectors,
            default_connector="fake",
            kafka={"partitions": 4},
            shutdown={"grace_s": 30.0},
        )
        await create_topics(settings.kafka)
        env = service_env(settings, connectors=connectors, default_connector="fake", runner__coalesce_ms="10")
        replicas = [ServiceProcess("agent-runner", env, free_port(), tmp_path, f"r{i}") for i in range(3)]
        starts = [start_run(i) for i in range(CONVERSATIONS)]
        bootstrap, runs, events = settings.kafka.bootstrap_servers, f"{topic_prefix}runs", f"{topic_prefix}events"
        waves = iter([starts[i : i + CONVERSATIONS // 4] for i in range(0, CONVERSATIONS, CONVERSATIONS // 4)])

        async def send(wave: list[StartRun]) -> None:
            for s in wave:
                await produce_raw(bootstrap, runs, s.to_json(), key=s.conversation_key.encode())

        try:
            await replicas[0].start()
            await send(next(waves))
            await asyncio.sleep(1.0)
            await asyncio.gather(replicas[1].start(), replicas[2].start())  # scale-out 1 → 3
            await send(next(waves))
            await asyncio.sleep(1.0)
            for leaving in replicas[1:]:  # scale-in 3 → 1, as KEDA removes replicas
                await send(next(waves))
                await asyncio.sleep(1.0)
                leaving.sigterm()
                assert await leaving.exited(timeout=45) == 0
            records = await read_until(
                bootstrap,
                events,
                lambda rs: sum(isinstance(e, RunFinished) for e in run_events(rs)) >= CONVERSATIONS,
                timeout=90,
            )
        finally:
            for p in replicas:
                p.stop()
        figures = table(run_events(records), starts, fake.requests)
    report("agent-runner scaled out 1 → 3, then in 3 → 1 (20 conversations)", figures)
