"""persistence reads on while a run is being written: flushes and commits are off the consume path.

While the consumer awaited every finished run's database write and a broker commit round trip,
reading `events` was bounded by them, and at the soak's load the committed offset fell further
and further behind. Here one run's write hangs: the next run must still be read to its end, the
commit must stay held at the hanging run's first event (it is only in memory), and once the write
goes through, both runs are stored and the commit reaches the end of the topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from sqlalchemy.exc import OperationalError

from agentstream.config import Settings
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence import app as app_module
from agentstream_persistence import flusher as flusher_module
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_persistence.buffers import BufferState, RunBuffer
from agentstream_persistence.flusher import FlushOutcome
from agentstream_persistence.rows import FlushRows
from agentstream_testing.fixtures import ADMIN_HEADERS
from tests.integration.persistence.test_app import publish, run_events, wait_for_run

pytestmark = pytest.mark.integration


async def committed_offset(settings: Settings, group: str, tp: TopicPartition) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, group_id=group)
    await consumer.start()
    try:
        return await consumer.committed(tp)
    finally:
        await consumer.stop()


async def until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"not reached in {timeout} s")


async def test_a_hanging_flush_neither_stops_reading_nor_lets_the_commit_pass_its_run(
    db_url: str, settings_factory: Callable[..., Settings], topics_created: str
) -> None:
    settings = settings_factory(db_url=db_url)
    svc = bootstrap_persistence(settings)
    release = asyncio.Event()
    attempt, attempt_many = svc.flusher.attempt, svc.flusher.attempt_many

    # Whether the two runs are read in one poll (then written together) or in two.
    async def held_for_the_first_run(buf: RunBuffer) -> FlushOutcome:
        if buf.root_run_id == "run-held":
            await release.wait()
        return await attempt(buf)

    async def held_with_the_first_run(bufs: list[RunBuffer]) -> list[FlushOutcome]:
        if any(b.root_run_id == "run-held" for b in bufs):
            await release.wait()
        return await attempt_many(bufs)

    svc.flusher.attempt = held_for_the_first_run  # type: ignore[method-assign]
    svc.flusher.attempt_many = held_with_the_first_run  # type: ignore[method-assign]
    # Both on one conversation, so one partition: the second is behind the first in the log.
    held, after = run_events("run-held", "first", "one"), run_events("run-next", "second", "two")
    await publish(settings, held + after)
    total = len(held) + len(after)
    topic = f"{settings.kafka.topic_prefix}events"
    async with (
        ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}) as host,
        httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(svc.name), timeout=5) as http,
    ):
        # The run after the hanging one is read to its end (its run.finished included).
        await until(lambda: (b := svc.buffers.get("run-next")) is not None and b.state is BufferState.FINISHED)
        partition = svc.buffers.get("run-held").origin.partition  # type: ignore[union-attr]
        tp = TopicPartition(topic, partition)
        await svc.commit()
        # Not past the hanging run's first event: it lives only in memory.
        assert (await committed_offset(settings, svc.runtime.group_id, tp) or 0) <= 0
        release.set()
        await wait_for_run(http, "run-held")
        await wait_for_run(http, "run-next")
        await until(lambda: len(svc.buffers) == 0)
        await svc.commit()
        assert await committed_offset(settings, svc.runtime.group_id, tp) == total


async def test_runs_that_waited_for_the_database_are_written_together_once_it_is_back(
    db_url: str, settings_factory: Callable[..., Settings], topics_created: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database away for a moment made every run finished meanwhile wait for a retry. Retried one
    # transaction each, they could not catch up with the runs still finishing at the soak's load: the
    # open buffers climbed and the commit stayed held at the first run that waited.
    settings = settings_factory(db_url=db_url)
    svc = bootstrap_persistence(settings)
    away = True
    written: list[list[str]] = []  # the runs of each transaction that went through
    write_run, write_runs = flusher_module.write_run, flusher_module.write_runs

    def refuse() -> None:
        if away:
            raise OperationalError("INSERT", {}, Exception("database is locked"))

    async def one(sessions: object, rows: FlushRows) -> None:
        refuse()
        await write_run(sessions, rows)  # type: ignore[arg-type]
        written.append([rows.run["run_id"]])

    async def many(sessions: object, runs: list[FlushRows]) -> None:
        refuse()
        await write_runs(sessions, runs)  # type: ignore[arg-type]
        written.append([rows.run["run_id"] for rows in runs])

    monkeypatch.setattr(flusher_module, "write_run", one)
    monkeypatch.setattr(flusher_module, "write_runs", many)
    roots = ["run-a", "run-b", "run-c"]
    await publish(settings, [e for i, root in enumerate(roots) for e in run_events(root, f"q{i}", f"a{i}")])
    async with (
        ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}) as host,
        httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(svc.name), timeout=5) as http,
    ):
        await until(lambda: set(svc.flusher.waiting) == set(roots))
        away = False
        for root in roots:
            await wait_for_run(http, root)
        await until(lambda: len(svc.buffers) == 0)
    assert written == [roots]  # the three in one transaction, in the order they finished


async def test_a_batch_the_database_cannot_take_is_retried_smaller_until_its_runs_go_through(
    db_url: str, settings_factory: Callable[..., Settings], topics_created: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A busy SQLite (one writer for five services) may never end a big transaction within the flush
    # timeout: retried whole, its runs would wait forever and hold the commit.
    settings = settings_factory(db_url=db_url)
    svc = bootstrap_persistence(settings)
    written: list[list[str]] = []
    write_run = flusher_module.write_run

    async def one(sessions: object, rows: FlushRows) -> None:
        await write_run(sessions, rows)  # type: ignore[arg-type]
        written.append([rows.run["run_id"]])

    async def too_big(sessions: object, runs: list[FlushRows]) -> None:
        raise OperationalError("INSERT", {}, Exception("database is locked"))

    monkeypatch.setattr(flusher_module, "write_run", one)
    monkeypatch.setattr(flusher_module, "write_runs", too_big)
    monkeypatch.setattr(app_module, "FLUSH_BATCH", 4)  # 4, then 2, then 1: three passes, not seven
    roots = ["run-x", "run-y", "run-z"]
    await publish(settings, [e for i, root in enumerate(roots) for e in run_events(root, f"q{i}", f"a{i}")])
    async with (
        ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}) as host,
        httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(svc.name), timeout=5) as http,
    ):
        for root in roots:
            await wait_for_run(http, root)
        await until(lambda: len(svc.buffers) == 0)
    assert sorted(written) == [[r] for r in roots]
