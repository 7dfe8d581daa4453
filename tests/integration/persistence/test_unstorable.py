"""A run the database refuses for its own data is dead-lettered once, and the partition moves on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.config import Settings
from agentstream.contracts import DeadLetter
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import read_until
from tests.integration.persistence.test_app import KEY, publish, run_events, wait_for_run

pytestmark = pytest.mark.integration


async def committed(settings: Settings, group: str, topic: str) -> dict[int, int | None]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(settings.kafka.partitions)}
    finally:
        await consumer.stop()


async def test_a_run_postgresql_cannot_hold_is_dead_lettered_and_the_offset_moves_on(
    db_url: str, settings_factory: Callable[..., Settings], topics_created: str
):
    if not db_url.startswith("postgresql"):
        pytest.skip("SQLite stores a NUL character; PostgreSQL text cannot")
    settings = settings_factory(db_url=db_url)
    svc = bootstrap_persistence(settings)
    port = free_port()
    bad = run_events("bad-1", "q", "an answer with a \x00 in it")  # valid for the contract, not for the column
    good = run_events("good-1", "and now?", "fine")
    await publish(settings, bad + good)
    topic = svc.topics.events
    async with (
        ServiceHost([svc], "127.0.0.1", {svc.name: port}) as host,
        httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(svc.name), timeout=5) as http,
    ):
        await wait_for_run(http, "good-1")
        dlq = await read_until(settings.kafka.bootstrap_servers, svc.topics.dlq, lambda rs: len(rs) >= 1)
        assert (await http.get("/v1/runs/bad-1")).status_code == 404
        assert len(svc.buffers) == 0
        ready = (await http.get("/readyz")).json()
        assert ready["checks"]["flush"] is True, ready
        async with asyncio.timeout(20):
            while True:  # committed past both runs: nothing pins the partition
                points = await committed(settings, svc.runtime.group_id, topic)
                if len(bad + good) in points.values():
                    break
                await asyncio.sleep(0.2)

    source = await read_until(settings.kafka.bootstrap_servers, topic, lambda rs: len(rs) >= len(bad + good))
    first_bad = source[0]
    [letter] = [DeadLetter.model_validate_json(r.value or b"") for r in dlq]
    assert (letter.source_topic, letter.source_partition, letter.source_offset, letter.key) == (
        topic,
        first_bad.partition,
        first_bad.offset,
        KEY,
    )
    assert letter.error.startswith("run could not be stored: DataError") and "\n" not in letter.error
    body = json.loads(letter.raw_value)
    assert body["root_run_id"] == "bad-1"
    assert [e["seq"] for e in body["events"]] == sorted(e["seq"] for e in body["events"])
    assert body["events"][-1]["type"] == "run.finished" and "\x00" in body["events"][-1]["text"]
