"""The handler guard on the real broker: a handler that raises loses nothing and stops nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

import pytest
from faststream import AckPolicy
from faststream.kafka.annotations import KafkaMessage
from structlog.testing import capture_logs

from agentstream.config import Settings
from agentstream.contracts import DeadLetter
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream.metrics import DeadLetterReason
from agentstream.service import Infra, Runtime
from agentstream_testing.kafka import RawRecord, produce_raw, read_until

pytestmark = pytest.mark.integration


class Careless:
    """Parses what it reads with `json.loads` and catches nothing: a service of the runtime's
    parts alone (no database, so no database readiness)."""

    name: ClassVar[str] = "careless"
    batch: ClassVar[bool] = False

    def __init__(self, settings: Settings) -> None:
        self.runtime = Runtime(Infra.build(settings, self.name, uses_database=False))
        self.settings, self.registry, self.http = settings, self.runtime.registry, self.runtime.http
        self.handled: list[Any] = []
        options: dict[str, Any] = {"batch": True, "max_records": 10} if self.batch else {}
        self.runtime.broker.subscriber(
            self.runtime.topics.inbound, **self.runtime.subscriber_options(), **options, ack_policy=AckPolicy.MANUAL
        )(self.on_record)

    async def start(self) -> None:
        await self.runtime.start()

    async def drain(self, grace_s: float) -> None:
        await self.runtime.drain(grace_s)

    async def stop(self) -> None:
        await self.runtime.stop()

    async def on_record(self, msg: KafkaMessage) -> None:
        bodies = [r.value for r in msg.raw_message] if self.batch else [bytes(msg.body)]  # type: ignore[union-attr]
        parsed = [json.loads(b) for b in bodies]
        self.handled.extend(p["n"] for p in parsed)


class CarelessBatch(Careless):
    name: ClassVar[str] = "careless-batch"
    batch: ClassVar[bool] = True


def dead_letter_counts(svc: Careless, topic: str) -> dict[DeadLetterReason, float | None]:
    labels = {"service": svc.name, "topic": topic}
    return {
        reason: svc.registry.get_sample_value("agentstream_dead_letters_total", {**labels, "reason": reason.value})
        for reason in DeadLetterReason
    }


def letters(records: list[RawRecord]) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(r.value or b"") for r in records]


@pytest.mark.parametrize("service", [Careless, CarelessBatch])
async def test_an_exception_in_a_handler_is_logged_and_dead_lettered_and_the_next_record_handled(
    service: type[Careless], settings_factory, topics_created
):
    settings = settings_factory()
    bootstrap, prefix = settings.kafka.bootstrap_servers, settings.kafka.topic_prefix
    with capture_logs() as logs:
        svc = service(settings)
        async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
            before = dead_letter_counts(svc, f"{prefix}inbound")
            await produce_raw(bootstrap, f"{prefix}inbound", b"[" * 5000, key=b"k")
            dlq = await read_until(bootstrap, f"{prefix}dlq", lambda rs: len(rs) >= 1)
            await produce_raw(bootstrap, f"{prefix}inbound", b'{"n": 7}', key=b"k")
            async with asyncio.timeout(20):
                while True:
                    if svc.handled == [7]:
                        break
                    await asyncio.sleep(0.05)
    [letter] = letters(dlq)
    # Every series exists at 0 from the start, so a rate over it sees the first dead letter.
    assert before == dict.fromkeys(DeadLetterReason, 0.0)
    assert dead_letter_counts(svc, f"{prefix}inbound") == {**before, DeadLetterReason.HANDLER_ERROR: 1.0}
    source = await read_until(bootstrap, f"{prefix}inbound", lambda rs: len(rs) >= 2)
    poison = next(r for r in source if r.value == b"[" * 5000)
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        poison.topic,
        poison.partition,
        poison.offset,
    )
    assert letter.error.startswith("RecursionError: maximum recursion depth exceeded")
    assert "\n" not in letter.error and "File " not in letter.error and letter.service == svc.name
    assert letter.raw_value == "[" * 5000 and letter.key == "k"
    [failed] = [e for e in logs if e["event"] == "handler failed"]
    assert (failed["topic"], failed["partition"], failed["offset"], failed["log_level"]) == (
        poison.topic,
        poison.partition,
        poison.offset,
        "error",
    )
    assert isinstance(failed["exc_info"], RecursionError)
