"""What Kafka transactions would cost where docs/decisions.md weighs them ("No Kafka transactions").

The two places: ingress (a batch of `inbound` records read, two records written per record —
`runs` and `events` —, the batch's offsets committed) and the tool-executor (one `tool.call`
read, one result written, its offset committed). Each is measured as a consume → produce →
commit loop on plain aiokafka, twice on the same broker:

- **current**: an idempotent producer (`acks=all`), the output's acks awaited, then the group's
  offsets committed by the consumer (what `batch_commits.py` and the executor do);
- **transactional**: `begin_transaction`, the same sends, `send_offsets_to_transaction`,
  `commit_transaction` (aiokafka's transactional producer; one per input partition in a real
  deployment, as decisions.md says: here there is one partition).

Per batch size (1: the executor, and ingress at low load; 100: ingress under load): records per
second through the loop, the cycle's p50 (batch read → offsets committed), the process's CPU per
record, and when a reader of the output sees each record (p50 of seen − sent): read_uncommitted
for the current path, read_committed for the transactional one (what every consumer of `runs`
and `events` would have to switch to). Ratios are transactional ÷ current, same run, same broker.

Apache Kafka only: Tansu has no transactions (InitProducerId fails).

    uv run python -m bench.kafka_transactions                  # a 1-node Apache Kafka on the JVM
    uv run python -m bench.kafka_transactions -n 3000 --batches 1 10 100
    uv run python -m bench.kafka_transactions --bootstrap 127.0.0.1:9092 --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import struct
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentstream_testing.kafka import SEEK_TO_BEGINNING

if __package__ in (None, ""):  # run as a file (`python bench/x.py`): make `bench` importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.kafka_baseline import _create_topic, _delete_topic, percentile  # noqa: E402

PAYLOAD = 256  # bytes per record, like the baseline
OUTPUTS_PER_INPUT = 2  # ingress writes `runs` + `events` per accepted message
STAMP = struct.Struct(">d")  # the sender's monotonic clock, first bytes of each output record


@dataclass(frozen=True)
class LoopResult:
    mode: str  # "current" | "transactional"
    batch: int  # input records per cycle
    records: int
    records_per_s: float
    cycle_p50_ms: float
    cpu_us_per_record: float
    visible_p50_ms: float  # output record sent → seen by a reader of the output topic


@dataclass(frozen=True)
class Comparison:
    batch: int
    current: LoopResult
    transactional: LoopResult

    @property
    def throughput_ratio(self) -> float:
        return self.transactional.records_per_s / self.current.records_per_s

    @property
    def cycle_ratio(self) -> float:
        return self.transactional.cycle_p50_ms / self.current.cycle_p50_ms

    @property
    def visible_ratio(self) -> float:
        return self.transactional.visible_p50_ms / self.current.visible_p50_ms


async def _prefill(bootstrap: str, topic: str, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        acks = [await producer.send(topic, b"x" * PAYLOAD, key=str(i).encode()) for i in range(n)]
        await asyncio.gather(*acks)
    finally:
        await producer.stop()


async def _reader(bootstrap: str, topic: str, isolation: str, expected: int, delays: list[float]) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        isolation_level=isolation,
        fetch_max_wait_ms=100,
        auto_offset_reset=SEEK_TO_BEGINNING,
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        while len(delays) < expected:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                now = time.monotonic()
                delays.extend(now - STAMP.unpack_from(r.value or b"")[0] for r in records)
    finally:
        await consumer.stop()


@contextlib.asynccontextmanager
async def _topics(bootstrap: str) -> AsyncIterator[tuple[str, str]]:
    source = await _create_topic(bootstrap, "tx-in", 1)
    sink = await _create_topic(bootstrap, "tx-out", 1)
    try:
        yield source, sink
    finally:
        await _delete_topic(bootstrap, source)
        await _delete_topic(bootstrap, sink)


async def run_loop(bootstrap: str, mode: str, batch: int, n: int) -> LoopResult:
    """n input records through one consume → produce → commit loop, `batch` at a time."""
    transactional = mode == "transactional"
    isolation = "read_committed" if transactional else "read_uncommitted"
    async with _topics(bootstrap) as (source, sink):
        await _prefill(bootstrap, source, n)
        group = f"agentstream-bench-tx-{uuid.uuid4().hex[:8]}"
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=isolation,
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=0,
            transactional_id=f"agentstream-bench-{uuid.uuid4().hex[:8]}" if transactional else None,
        )
        await consumer.start()
        await producer.start()
        delays: list[float] = []
        reader = asyncio.create_task(_reader(bootstrap, sink, isolation, n * OUTPUTS_PER_INPUT, delays))
        cycles: list[float] = []
        done = 0
        try:
            for _ in range(600):  # the group join (in the background, up to 30 s), not measured
                if consumer.assignment():
                    break
                await asyncio.sleep(0.05)
            cpu0, t0 = time.process_time(), time.monotonic()
            while done < n:
                got = await consumer.getmany(timeout_ms=1000, max_records=batch)
                if not got:
                    continue
                started = time.monotonic()
                offsets = {tp: records[-1].offset + 1 for tp, records in got.items()}
                count = sum(len(records) for records in got.values())
                if transactional:
                    await producer.begin_transaction()
                acks = []
                for records in got.values():
                    for r in records:
                        for _ in range(OUTPUTS_PER_INPUT):
                            value = STAMP.pack(time.monotonic()) + b"y" * (PAYLOAD - STAMP.size)
                            acks.append(await producer.send(sink, value, key=r.key))
                if transactional:
                    await producer.send_offsets_to_transaction(offsets, group)
                    await producer.commit_transaction()
                else:
                    await asyncio.gather(*acks)
                    await consumer.commit(offsets)
                cycles.append(time.monotonic() - started)
                done += count
            elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
            async with asyncio.timeout(60):
                await reader
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            await producer.stop()
            await consumer.stop()
    return LoopResult(
        mode=mode,
        batch=batch,
        records=done,
        records_per_s=done / elapsed,
        cycle_p50_ms=percentile(cycles, 50) * 1000,
        cpu_us_per_record=cpu / done * 1e6,
        visible_p50_ms=percentile(delays, 50) * 1000,
    )


async def compare(bootstrap: str, batches: Sequence[int], n: int) -> list[Comparison]:
    out = []
    for batch in batches:
        records = max(batch * 20, min(n, batch * 400))  # at least 20 cycles; batch 1 kept short
        print(f"batch {batch}: {records} records, current then transactional", file=sys.stderr)
        current = await run_loop(bootstrap, "current", batch, records)
        transactional = await run_loop(bootstrap, "transactional", batch, records)
        out.append(Comparison(batch, current, transactional))
    return out


def format_table(results: Sequence[Comparison], broker: str) -> str:
    lines = [
        f"Kafka transactions vs the current path ({broker})",
        "| batch | mode | records/s | cycle p50 | CPU/record | output visible p50 |",
        "|---|---|---|---|---|---|",
    ]
    for c in results:
        for r in (c.current, c.transactional):
            lines.append(
                f"| {c.batch} | {r.mode} | {r.records_per_s:,.0f} | {r.cycle_p50_ms:.1f} ms"
                f" | {r.cpu_us_per_record:,.0f} µs | {r.visible_p50_ms:.1f} ms |"
            )
    lines.append("")
    for c in results:
        lines.append(
            f"batch {c.batch}: transactional ÷ current = {c.throughput_ratio:.2f}× throughput,"
            f" {c.cycle_ratio:.2f}× cycle p50, {c.visible_ratio:.2f}× time to visible"
        )
    return "\n".join(lines)


@contextlib.asynccontextmanager
async def kafka_broker(bootstrap: str | None) -> AsyncIterator[tuple[str, str]]:
    if bootstrap:
        yield bootstrap, f"Apache Kafka at {bootstrap}"
        return
    from agentstream_testing.kafka_jvm import KAFKA_VERSION, KafkaJvmCluster

    cluster = KafkaJvmCluster(nodes=1)
    await asyncio.to_thread(cluster.start)
    try:
        yield cluster.bootstrap_servers, f"Apache Kafka {KAFKA_VERSION}, 1 node on the JVM"
    finally:
        await asyncio.to_thread(cluster.stop)


async def _run(args: argparse.Namespace) -> tuple[str, list[Comparison]]:
    async with kafka_broker(args.bootstrap) as (bootstrap, broker):
        return broker, await compare(bootstrap, args.batches, args.n)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an Apache Kafka to use (default: a 1-node cluster on the JVM)")
    parser.add_argument("-n", type=int, default=2000, help="input records per loop, at most (default 2000)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 100], help="input records per cycle")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    broker, results = asyncio.run(_run(args))
    if args.json:
        print(json.dumps({"broker": broker, "results": [asdict(c) for c in results]}))
    else:
        print(format_table(results, broker))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
