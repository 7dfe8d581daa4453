"""`kill -9` of persistence during a burst of 50 runs.

persistence commits a partition only up to its oldest unflushed run, so after a
restart it re-reads what was only in memory: every run is stored, each message once.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select

from agentstream.contracts import ReplyTarget, StartRun, User
from agentstream.db import Message, Run, create_engine, session_factory
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, read_until
from tests.chaos.processes import ServiceProcess, service_env

pytestmark = pytest.mark.chaos

RUNS = 50


def starts() -> list[StartRun]:
    return [
        StartRun(
            run_id=f"burst-{i}",
            conversation_key=f"web:burst-{i}",
            assistant_id="default",
            user=User(id="u1"),
            text=f"hello number {i}",
            reply_target=ReplyTarget(platform="web", chat_id=f"burst-{i}"),
        )
        for i in range(RUNS)
    ]


def finished_count(records: list[RawRecord]) -> int:
    return sum(b'"run.finished"' in (r.value or b"") for r in records)


async def produce_all(bootstrap: str, topic: str, records: list[StartRun]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for s in records:
            await producer.send(topic, s.to_json(), key=s.conversation_key.encode())
        await producer.flush()
    finally:
        await producer.stop()


async def test_persistence_killed_mid_burst_stores_every_run_exactly_once(kafka_bootstrap, topic_prefix, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'burst.db'}"
    connectors = [{"id": "demo", "type": "scripted", "token_delay_ms": 20}]
    settings = make_test_settings(kafka_bootstrap, topic_prefix, db, connectors=connectors)
    await create_topics(settings.kafka)
    env = service_env(settings)
    port = free_port()
    first = ServiceProcess("persistence", env, port, tmp_path, "first")
    second = ServiceProcess("persistence", env, port, tmp_path, "second")
    runner = runner_bootstrap(settings)
    events_topic = f"{topic_prefix}events"
    engine = create_engine(db)
    sessions = session_factory(engine)
    try:
        host = ServiceHost([runner], "127.0.0.1", {runner.name: free_port()})
        try:
            await asyncio.gather(host.start(), first.start())  # the group joins overlap
            await produce_all(kafka_bootstrap, f"{topic_prefix}runs", starts())
            # Killed while runs are still streaming: some flushed, some only in memory.
            await read_until(kafka_bootstrap, events_topic, lambda rs: finished_count(rs) >= 10, timeout=60)
            first.kill9()
            await read_until(kafka_bootstrap, events_topic, lambda rs: finished_count(rs) >= RUNS, timeout=90)
            await second.start()
            async with asyncio.timeout(60):
                while True:
                    async with sessions() as s:
                        stored = await s.scalar(select(func.count()).select_from(Run))
                    if stored == RUNS:
                        break
                    await asyncio.sleep(0.2)
        finally:
            await host.stop()
        async with sessions() as s:
            runs = (await s.execute(select(Run.run_id, Run.status))).all()
            per_run = dict(
                (await s.execute(select(Message.root_run_id, func.count()).group_by(Message.root_run_id))).all()
            )
            users = dict(
                (await s.execute(select(Message.root_run_id, Message.content).where(Message.role == "user"))).all()
            )
        assert sorted(r.run_id for r in runs) == sorted(s.run_id for s in starts())
        assert {r.status for r in runs} == {"completed"}
        assert per_run == {s.run_id: 2 for s in starts()}  # the question and the answer, once each
        assert users == {s.run_id: s.text for s in starts()}
    finally:
        first.stop()
        second.stop()
        await engine.dispose()
