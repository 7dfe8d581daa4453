"""The parts a service is composed of (agentstream/parts/), each on its own: what a service
gets from one without knowing about the others."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import structlog
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import OperationalError

from agentstream.auth import Authenticator
from agentstream.config import load_settings
from agentstream.contracts import DeadLetter
from agentstream.db import create_engine
from agentstream.kafka.topics import DLQ
from agentstream.metrics import DeadLetterReason
from agentstream.metrics.lag import Subscription
from agentstream.parts.dead_letters import DeadLetters
from agentstream.parts.drain import Drain
from agentstream.parts.lag import ServiceLag
from agentstream.parts.readiness import Readiness, database_ready

LOG = structlog.get_logger("test")


class RecordingPublisher:
    """What `DeadLetters` needs of the publisher part: `publish(topic, record)`."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []

    async def publish(self, topic: Any, record: Any, key: str | None = None) -> None:
        self.sent.append((topic, record))


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_a_dead_letter_carries_where_the_record_was_and_why_and_is_counted_by_reason_class() -> None:
    registry, publisher = CollectorRegistry(), RecordingPublisher()
    letters = DeadLetters(publisher, registry, "svc", LOG)  # type: ignore[arg-type]
    letters.zero([Subscription("g", ("t.events",))])
    for reason in DeadLetterReason:  # every series exists at 0 from the start
        assert sample(registry, "agentstream_dead_letters_total", service="svc", topic="t.events", reason=reason) == 0
    raw = SimpleNamespace(topic="t.events", partition=2, offset=7, key=b"web:a", value=b"\xff{not json")
    await letters.record(raw, "not valid JSON: (record): Invalid JSON")
    [(topic, letter)] = publisher.sent
    assert topic is DLQ and isinstance(letter, DeadLetter)
    assert (letter.source_topic, letter.source_partition, letter.source_offset, letter.key) == (
        "t.events",
        2,
        7,
        "web:a",
    )
    assert letter.service == "svc" and letter.raw_value == "\ufffd{not json"
    counted = {
        r: sample(registry, "agentstream_dead_letters_total", service="svc", topic="t.events", reason=r)
        for r in DeadLetterReason
    }
    assert sum(v or 0 for v in counted.values()) == 1


async def test_a_failed_record_is_dead_lettered_with_the_errors_type_and_a_lost_broker_only_logged() -> None:
    publisher = RecordingPublisher()
    letters = DeadLetters(publisher, CollectorRegistry(), "svc", LOG)  # type: ignore[arg-type]
    raw = SimpleNamespace(topic="t", partition=0, offset=1, key=None, value=b"{}")
    await letters.record_failed(raw, KeyError("x"))
    assert publisher.sent[0][1].error.startswith("KeyError")

    async def gone(topic: Any, record: Any, key: str | None = None) -> None:
        raise ConnectionError("broker away")

    publisher.publish = gone  # type: ignore[method-assign]
    await letters.record_failed(raw, KeyError("y"))  # does not raise: the log line is what is left


async def test_a_drain_waits_for_the_work_and_stops_at_the_grace_period() -> None:
    registry = CollectorRegistry()
    drain = Drain("svc", registry, LOG)
    finished: list[str] = []

    async def quick() -> None:
        finished.append("quick")

    await drain.run(1.0, quick)
    assert drain.draining and finished == ["quick"]
    stuck = asyncio.Event()
    started = asyncio.get_running_loop().time()
    await drain.run(0.05, stuck.wait)  # never set: the grace period ends it
    assert asyncio.get_running_loop().time() - started < 1.0
    drain.cut("runs", 0)
    drain.cut("runs", 2)
    assert sample(registry, "agentstream_shutdown_cut_total", service="svc", what="runs") == 2


async def test_readiness_serves_the_checks_added_after_the_app_was_made() -> None:
    settings = load_settings()
    readiness = Readiness("svc", CollectorRegistry(), Authenticator(settings.auth, settings.database.url))

    async def never() -> bool:
        return False

    readiness.add("broker", never)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=readiness.http), base_url="http://t") as http:
        response = await http.get("/readyz")
    assert response.status_code == 503 and "broker" in response.text


async def test_the_database_check_answers_for_a_live_database_and_raises_for_a_dead_one() -> None:
    live = create_engine("postgresql+psycopg://postgres@127.0.0.1:5432/test")
    dead = create_engine("postgresql+psycopg://postgres@127.0.0.1:1/test")
    try:
        assert await database_ready(live)() is True
        with pytest.raises(OperationalError):  # not ready, with the reason `/readyz` shows
            await database_ready(dead)()
    finally:
        await live.dispose()
        await dead.dispose()


async def test_lag_is_not_read_when_its_interval_is_zero_or_nothing_is_subscribed() -> None:
    settings = load_settings()
    off = ServiceLag(settings.kafka.model_copy(update={"lag_interval_s": 0}), "svc", CollectorRegistry(), LOG)
    off.start([Subscription("g", ("t",))])
    assert off._task is None
    await off.stop()
    idle = ServiceLag(settings.kafka, "svc", CollectorRegistry(), LOG)
    idle.start([])
    assert idle._task is None
    await idle.stop()
