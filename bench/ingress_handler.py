"""Ingress's own CPU per record: the batch handler without Kafka or a database.

The real service (`bootstrap`, `BatchConsumer.handle`, `on_inbound`, the pipeline, `carry_out`,
`BatchOutput`) decides batches of the records `bench.ingress_throughput` writes; dedupe and the
`/model` overrides are answered from memory, and the producer acks every record batch at once
(aiokafka's `BatchBuilder` still builds it). What is left out is what the service pays per batch
or inside libraries (aiokafka's fetch and send, SQLAlchemy and psycopg, FastStream's loop), so
the figure is the part of ingress's CPU per record its own code decides. CPU time
(`time.process_time`), which moves little with the machine's load.

    uv run python -m bench.ingress_handler                     # 5 rounds of 20 batches of 500
    uv run python -m bench.ingress_handler --profile 30        # cProfile of one round, top 30
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRecord

import agentstream_ingress.app as ingress_app
from agentstream.contracts import InboundMessage
from agentstream.contracts.inbound import DedupeKey
from agentstream.observability import configure_logging
from agentstream.service import freeze_startup_objects
from agentstream_ingress.app import MAX_BATCH, IngressService
from agentstream_ingress.bootstrap import bootstrap

if __package__ in (None, ""):  # run as a file: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.ingress_throughput import _record, bench_settings  # noqa: E402


class MemoryPorts:
    """Dedupe and overrides from memory: every record is new, no conversation has a `/model`."""

    def __init__(self) -> None:
        self.seen: set[DedupeKey] = set()
        self._taken: list[DedupeKey] = []

    async def first_sightings(self, idents: Sequence[DedupeKey]) -> set[DedupeKey]:
        fresh = set(idents) - self.seen
        self.seen |= fresh
        self._taken.extend(fresh)
        return fresh

    def take_claims(self) -> list[DedupeKey]:
        taken, self._taken = self._taken, []
        return taken

    async def record_sightings(self, idents: Sequence[DedupeKey]) -> None:
        pass

    def release_sightings(self, idents: Sequence[DedupeKey]) -> None:
        pass

    async def role_overrides(self, keys: Collection[str]) -> dict[str, str | None]:
        return {}

    async def remember_starts(self, started: Sequence[tuple[InboundMessage, str]]) -> None:
        pass


def acking_producer() -> AIOKafkaProducer:
    """An unstarted aiokafka producer whose record batches are acked as soon as they are sent."""
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1")
    producer._closed = True  # never started: no "unclosed producer" warning at exit

    async def partitions_for(topic: str) -> set[int]:
        return {0}

    async def send_batch(builder: Any, topic: str, *, partition: int) -> asyncio.Future[None]:
        builder._build()  # the bytes aiokafka would send
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    producer.partitions_for = partitions_for  # type: ignore[method-assign]
    producer.send_batch = send_batch  # type: ignore[method-assign,assignment]
    return producer


def consumer_records(topic: str, first: int, n: int) -> list[ConsumerRecord[bytes, bytes]]:
    now_ms = int(time.time() * 1000)
    records = []
    for offset in range(first, first + n):
        value, key = _record(offset)
        records.append(ConsumerRecord(topic, 0, offset, now_ms, 0, key, value, None, len(key), len(value), ()))
    return records


async def _service(database_dir: str) -> IngressService:
    settings = bench_settings("127.0.0.1:1", f"sqlite+aiosqlite:///{database_dir}/ingress.db", embedded=False)
    configure_logging(settings.log_level, settings=settings)  # as `serve` does: JSON lines, INFO
    service = bootstrap(settings)
    ports = MemoryPorts()
    service.ports = service.pipeline.ports = ports  # type: ignore[assignment]
    producer = acking_producer()
    ingress_app.producer_of = lambda broker: producer  # type: ignore[assignment]
    return service


def prepared(service: IngressService, first: int, batches: int) -> list[list[ConsumerRecord[bytes, bytes]]]:
    topic = service.topics.name("inbound")
    return [consumer_records(topic, first + b * MAX_BATCH, MAX_BATCH) for b in range(batches)]


async def _round(service: IngressService, batches: list[list[ConsumerRecord[bytes, bytes]]]) -> tuple[int, float]:
    """The batches through the consumer's handler: (records, CPU seconds)."""
    started = time.process_time()
    for records in batches:
        await service.inbound.handle(records)
        await service.inbound.commits.flush()
    await service.pipeline.settle()
    return sum(map(len, batches)), time.process_time() - started


async def _main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as database_dir:
        service = await _service(database_dir)
        await _round(service, prepared(service, 0, 2))  # warm: caches, first-use imports
        freeze_startup_objects()  # as the service does once started
        first = 2 * MAX_BATCH
        if args.profile:
            batches = prepared(service, first, args.batches)
            profiler = cProfile.Profile()
            profiler.enable()
            n, cpu_s = await _round(service, batches)
            profiler.disable()
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.profile)
            print(f"(profiled) {cpu_s / n * 1e6:.1f} µs per record")
            return 0
        per_record = []
        for _ in range(args.rounds):
            n, cpu_s = await _round(service, prepared(service, first, args.batches))
            first += n
            per_record.append(cpu_s / n * 1e6)
        print(
            f"ingress handler: {statistics.median(per_record):.1f} µs per record (median of {args.rounds} rounds "
            f"of {args.batches}×{MAX_BATCH}; rounds {', '.join(f'{v:.1f}' for v in per_record)})"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingress_handler", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds measured (default 5)")
    parser.add_argument("--batches", type=int, default=20, help="batches of 500 per round (default 20)")
    parser.add_argument("--profile", type=int, metavar="N", help="profile one round, print the top N functions")
    parser.add_argument("--sort", default="tottime", help="pstats sort key with --profile (default tottime)")
    return asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
