"""What a batch of inbound records becomes, byte for byte: topic, partition, key, headers and JSON
value of every record ingress hands the producer (`on_inbound` → `carry_out` → `BatchOutput`).

The expected records (`batch_bytes.json`) were captured from the code before ingress's CPU per
record was cut (2026-12-07): the same input must give the same bytes, the same ids and the same
partitions, whatever the handler does inside. The clock is fixed; the fields drawn at random
(a notice's run id, a dead letter's or command's id, their `ts`) are masked. Regenerate only for
an intended change of the output:

    uv run python -m tests.unit.ingress.test_batch_bytes > tests/unit/ingress/batch_bytes.json
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, ConsumerRecord
from aiokafka.record.default_records import DefaultRecordBatch

import agentstream_ingress.app as ingress_app
import agentstream_ingress.starting as starting
from agentstream.config import Settings, load_settings
from agentstream.contracts.inbound import DedupeKey
from agentstream.observability import configure_logging
from agentstream_ingress.bootstrap import bootstrap
from agentstream_testing.logs import logging_restored

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.unit.ingress.conftest import FakePorts  # noqa: E402

EXPECTED = Path(__file__).with_name("batch_bytes.json")
NOW = datetime(2026, 12, 7, 1, 2, 3, 456789, tzinfo=UTC)  # every StartRun's `ts`
READ_AT = 1_796_000_523.125  # the batch's `ingress_read_at`
PRODUCED_MS = 1_796_000_523_000  # every inbound record's Kafka timestamp
PARTITIONS = {0, 1, 2, 3}  # of every output topic: the keys spread over them
RANDOM_FIELDS = ("id", "ts", "run_id", "root_run_id")  # masked in the records that draw them
DRAWN_BY = ("notice", "dead_letter", "run.interrupt", "conversation.reset")


class BatchPorts(FakePorts):
    """The in-memory ports with the claims `on_inbound` takes and gives back."""

    def __init__(self) -> None:
        super().__init__()
        self.paired.add(("telegram", "paired-user"))
        self._taken: list[DedupeKey] = []

    async def first_sightings(self, idents: Sequence[DedupeKey]) -> set[DedupeKey]:
        fresh: set[DedupeKey] = await super().first_sightings(idents)
        self._taken.extend(fresh)
        return fresh

    def take_claims(self) -> list[DedupeKey]:
        taken, self._taken = self._taken, []
        return taken

    async def record_sightings(self, idents: Sequence[DedupeKey]) -> None:
        pass

    def release_sightings(self, idents: Sequence[DedupeKey]) -> None:
        pass


def settings(database_dir: Path) -> Settings:
    return load_settings(
        kafka={"bootstrap_servers": "127.0.0.1:1", "topic_prefix": "bytes.", "partitions": 4},
        database={"url": f"sqlite+aiosqlite:///{database_dir}/ingress.db"},
        authz={
            "default": {"allow_all": False, "users": ["u-1", "u-2", "u-3"]},
            "rate_limit": {"enabled": False},
        },
        profiles={
            "support": {"assistant": "helper", "connector_role": "fast", "delivery": {"edit_interval": 2}},
            "queued": {"double_texting": "enqueue"},
        },
        routes=[{"profile": "support", "team": "T9"}, {"profile": "queued", "chat": "q-chat"}],
    )


def message(id: str, sender: str = "u-1", **over: Any) -> dict[str, Any]:
    return {"id": id, "platform": "telegram", "chat_id": "42", "user": {"id": sender}, "text": f"hello {id}", **over}


INPUTS: list[dict[str, Any] | bytes] = [
    message("m-1"),
    message(
        "m-2",
        sender="u-2",
        chat_id="c-7",
        thread_id="t-3",
        reply_to_id="r-1",
        text='naïve ☃ 𝄞 "quoted" \\ back\nslash',
        metadata={"bot": "b1", "n": 3, "nested": {"a": [1, None, True]}},
        attachments=[{"url": "https://example.test/a.png", "mime_type": "image/png"}],
        sent_at="2026-12-07T01:00:00Z",
    ),
    message("m-3", user={"id": "u-3", "team_id": "T9", "tenant_id": "acme", "name": "Ann"}),
    message("m-4", chat_id="q-chat", assistant_id="other", source="webhook:telegram:b1"),
    message("m-1"),  # a duplicate in the batch: dropped
    message("m-5", sender="stranger"),  # not on the allowlist: refused with a notice
    message("m-6", sender="paired-user"),  # paired, but an allowlist is no pairing: refused
    b"{not json",  # a dead letter, nobody to tell
    json.dumps({**message("m-7"), "user": {}}).encode(),  # a dead letter, its chat told
    message("m-8", text="/stop"),  # a command for the runner, no notice
    message("m-9", text="/new"),
    message("m-10", profile="support", text="x" * 2000),
]


def consumer_records(topic: str) -> list[ConsumerRecord[bytes, bytes]]:
    records = []
    for offset, item in enumerate(INPUTS):
        value = item if isinstance(item, bytes) else json.dumps(item).encode()
        key = b"telegram:42"
        records.append(ConsumerRecord(topic, 0, 100 + offset, PRODUCED_MS + offset, 0, key, value, None, 11, 0, ()))
    return records


def capturing_producer(sent: list[tuple[str, int, Any]]) -> AIOKafkaProducer:
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1")
    producer._closed = True  # never started

    async def partitions_for(topic: str) -> set[int]:
        return PARTITIONS

    async def send_batch(builder: Any, topic: str, *, partition: int) -> asyncio.Future[None]:
        sent.append((topic, partition, builder))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    producer.partitions_for = partitions_for  # type: ignore[method-assign]
    producer.send_batch = send_batch  # type: ignore[method-assign,assignment]
    return producer


def masked(value: bytes) -> str:
    """The value as written, or with its drawn fields replaced, key order kept."""
    record = json.loads(value)
    if record.get("type") not in DRAWN_BY:
        return value.decode()
    return json.dumps({k: ("<drawn>" if k in RANDOM_FIELDS else v) for k, v in record.items()})


def written(sent: list[tuple[str, int, Any]]) -> list[dict[str, Any]]:
    out = []
    for topic, partition, builder in sent:
        for record in DefaultRecordBatch(bytes(builder._build())):
            out.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "key": record.key.decode(),
                    "headers": [[k, v.decode()] for k, v in record.headers],
                    "value": masked(record.value),
                }
            )
    return out


async def capture(database_dir: Path, patch: Any) -> list[dict[str, Any]]:
    """The records one batch of INPUTS becomes, with the clock fixed through `patch(obj, name, value)`."""
    sent: list[tuple[str, int, Any]] = []
    producer = capturing_producer(sent)
    patch(ingress_app, "producer_of", lambda broker: producer)
    patch(ingress_app, "time", types.SimpleNamespace(time=lambda: READ_AT, monotonic=lambda: 0.0))
    patch(starting, "datetime", types.SimpleNamespace(now=lambda tz=None: NOW))
    service = bootstrap(settings(database_dir))
    service.ports = service.pipeline.ports = BatchPorts()  # type: ignore[assignment]
    try:
        await service.inbound.handle(consumer_records(service.topics.inbound))
        await service.inbound.commits.flush()
        await service.pipeline.settle()
    finally:
        if service.infra.engine is not None:
            await service.infra.engine.dispose()
    return written(sent)


@pytest.fixture
def logging_at(request: pytest.FixtureRequest) -> Iterator[None]:
    with logging_restored():
        configure_logging(request.param, json=True)
        yield


@pytest.mark.parametrize("logging_at", ["INFO", "DEBUG"], indirect=True)
async def test_a_batch_becomes_the_same_bytes(
    logging_at: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At INFO the records are carried out without a log context, at DEBUG inside one: the same bytes."""
    got = await capture(tmp_path, monkeypatch.setattr)
    assert got == json.loads(EXPECTED.read_text())
    started = [r for r in got if json.loads(r["value"])["type"] == "run.start"]
    assert len(started) == 5  # m-1, -2, -3, -4 and -10; the rest are refused, dead, dropped or commands
    assert len({r["partition"] for r in got}) > 1  # the keys do spread: partitions are checked


if __name__ == "__main__":
    import tempfile

    def _set(obj: Any, name: str, value: Any) -> None:
        setattr(obj, name, value)

    configure_logging("WARNING")  # to stderr: stdout is the capture
    with tempfile.TemporaryDirectory() as directory:
        print(json.dumps(asyncio.run(capture(Path(directory), _set)), indent=1, ensure_ascii=False))
