"""Raw aiokafka produce→consume baseline: what the broker alone costs.

Every other benchmark reports its figures as ratios to this one, measured in the
same run on the same broker, so that "agentstream adds 3x the broker's round trip"
means the same on a laptop with the embedded Tansu and on a production cluster.

    uv run python -m bench.kafka_baseline                 # embedded Tansu
    uv run python -m bench.kafka_baseline --bootstrap localhost:9094 -n 5000

Two measurements on a fresh single-partition topic, with no project code in the
data path (plain aiokafka producer and consumer, tuned like the services' clients):
  1. latency: N messages one at a time; each is timed from `send` until the
     consumer has it back → p50 / p99 in ms;
  2. throughput: N messages pipelined (send without awaiting each ack) while the
     consumer drains them → messages per second, first send to last receive.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from agentstream.config import KafkaSettings
from agentstream.kafka import EmbeddedBroker
from agentstream.kafka.flavor import tuning

BOOTSTRAP_ENV = "AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS"
EMBEDDED_ENV = "AGENTSTREAM__KAFKA__IN_MEMORY"

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@dataclass(frozen=True)
class BaselineResult:
    bootstrap: str
    embedded: bool
    messages: int
    payload_bytes: int
    p50_ms: float
    p99_ms: float
    msgs_per_s: float
    round_trips: int  # latency-phase messages that came back (== messages)
    burst_received: int  # throughput-phase messages that came back (== messages)

    def latency_ratio(self, ms: float) -> float:
        """How many broker round trips (p50) `ms` is worth."""
        return ms / self.p50_ms

    def throughput_ratio(self, msgs_per_s: float) -> float:
        """`msgs_per_s` as a fraction of the raw broker throughput."""
        return msgs_per_s / self.msgs_per_s


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): always one of the measured values."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil without floats drifting
    return ordered[int(rank) - 1]


def _payload(seq: int, size: int) -> bytes:
    head = f'{{"seq":{seq},"pad":"'.encode()
    return head + b"x" * max(0, size - len(head) - 2) + b'"}'


def _seq(value: bytes) -> int:
    return int(json.loads(value)["seq"])


async def _create_topic(bootstrap: str, kind: str, partitions: int) -> str:
    topic = f"agentstream-bench.{kind}.{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return topic


async def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    # Best effort: a leftover bench topic is harmless, a failed cleanup must not hide the figures.
    with contextlib.suppress(Exception):
        await admin.start()
        try:
            await admin.delete_topics([topic])
        finally:
            await admin.close()


@contextlib.asynccontextmanager
async def _fresh_topic(
    bootstrap: str, *, embedded: bool, kind: str, partitions: int
) -> AsyncIterator[tuple[AIOKafkaProducer, AIOKafkaConsumer, str]]:
    """A new topic with a started producer and a started, unassigned consumer, tuned from
    `KafkaSettings` like the services' clients; all stopped and the topic deleted on exit."""
    kafka = KafkaSettings(bootstrap_servers=bootstrap, in_memory=embedded)
    async with contextlib.AsyncExitStack() as stack:
        topic = await _create_topic(bootstrap, kind, partitions)
        stack.push_async_callback(_delete_topic, bootstrap, topic)
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=tuning(kafka).idempotent, acks="all", linger_ms=0
        )
        await producer.start()
        stack.push_async_callback(producer.stop)
        # Manual assignment, no group: a group join would cost seconds on Tansu and measure nothing useful.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=tuning(kafka).fetch_max_wait_ms,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        stack.push_async_callback(consumer.stop)
        yield producer, consumer, topic


async def _latency_phase(
    producer: AIOKafkaProducer,
    consumer: AIOKafkaConsumer,
    topic: str,
    n: int,
    warmup: int,
    payload_bytes: int,
    progress: Progress | None,
    timeout_s: float,
) -> list[float]:
    samples: list[float] = []
    step = max(1, n // 10)
    for seq in range(-warmup, n):  # negative seqs warm up connections and metadata; not timed
        started = time.perf_counter()
        await producer.send_and_wait(topic, _payload(seq, payload_bytes))
        async with asyncio.timeout(timeout_s):
            record = await consumer.getone()
        elapsed_ms = (time.perf_counter() - started) * 1000
        if _seq(record.value) != seq:
            raise RuntimeError(f"expected seq {seq}, got {_seq(record.value)}: the topic is not ours alone")
        if seq >= 0:
            samples.append(elapsed_ms)
            if progress and (seq + 1) % step == 0:
                progress("latency", seq + 1, n)
    return samples


async def _burst_phase(
    producer: AIOKafkaProducer,
    consumer: AIOKafkaConsumer,
    topic: str,
    n: int,
    payload_bytes: int,
    progress: Progress | None,
    timeout_s: float,
) -> tuple[int, float]:
    base = 1_000_000  # burst seqs never collide with latency seqs

    async def drain() -> int:
        received = 0
        while received < n:
            batches = await consumer.getmany(timeout_ms=100)
            for records in batches.values():
                received += sum(1 for r in records if _seq(r.value) >= base)
        return received

    started = time.perf_counter()
    drainer = asyncio.create_task(drain())
    try:
        acks = [await producer.send(topic, _payload(base + i, payload_bytes)) for i in range(n)]
        await asyncio.gather(*acks)
        if progress:
            progress("burst", n, n)
        async with asyncio.timeout(timeout_s):
            received = await drainer
    finally:
        drainer.cancel()
    return received, time.perf_counter() - started


async def measure_baseline(
    bootstrap: str,
    n: int = 2000,
    *,
    embedded: bool = False,
    payload_bytes: int = 256,
    warmup: int = 20,
    progress: Progress | None = None,
    timeout_s: float = 30.0,
) -> BaselineResult:
    """Measure the raw round trip and throughput of the broker at `bootstrap`.

    `embedded=True` applies the Tansu tuning the services use (no idempotent producer,
    short fetch wait), taken from `KafkaSettings` so the baseline and the services
    always talk to the broker the same way.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    # One partition: one ordered stream, so "the next record" is "my record".
    async with _fresh_topic(bootstrap, embedded=embedded, kind="baseline", partitions=1) as (producer, consumer, topic):
        consumer.assign([TopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        samples = await _latency_phase(producer, consumer, topic, n, warmup, payload_bytes, progress, timeout_s)
        received, seconds = await _burst_phase(producer, consumer, topic, n, payload_bytes, progress, timeout_s)
    return BaselineResult(
        bootstrap=bootstrap,
        embedded=embedded,
        messages=n,
        payload_bytes=payload_bytes,
        p50_ms=percentile(samples, 50),
        p99_ms=percentile(samples, 99),
        msgs_per_s=received / seconds,
        round_trips=len(samples),
        burst_received=received,
    )


@dataclass(frozen=True)
class LoadedRoundTrip:
    """The raw round trip while the broker carries a background stream of records."""

    records_per_s: float  # the background load, as asked
    partitions: int
    p50_ms: float
    p99_ms: float
    probes: int


async def measure_loaded_round_trip(
    bootstrap: str,
    records_per_s: float,
    *,
    partitions: int = 4,
    seconds: float = 3.0,
    probe_interval_s: float = 0.01,
    embedded: bool = False,
    payload_bytes: int = 256,
) -> LoadedRoundTrip:
    """Round trips of probe records while `records_per_s` other records flow through the
    same topic (`partitions` partitions), all read by the same consumer — raw aiokafka, the
    load a benchmark's own records put on the broker, with no project code in the path.

    Probes are sent every `probe_interval_s` without waiting for the previous one; each is
    timed from `send` until the consumer has it."""
    sent: dict[int, float] = {}
    samples: list[float] = []
    all_back = asyncio.Event()
    all_sent = False
    base = 10_000_000  # probe seqs; background records count up from 0

    async with _fresh_topic(bootstrap, embedded=embedded, kind="loaded", partitions=partitions) as (
        producer,
        consumer,
        topic,
    ):

        async def read() -> None:
            while True:
                batches = await consumer.getmany(timeout_ms=100)
                now = time.perf_counter()
                for records in batches.values():
                    for record in records:
                        if (seq := _seq(record.value)) >= base and seq in sent:
                            samples.append((now - sent.pop(seq)) * 1000)
                            if not sent and all_sent:
                                all_back.set()

        async def background() -> None:
            tick, seq, started = 0.01, 0, time.perf_counter()
            while True:
                due = int((time.perf_counter() - started) * records_per_s)
                for _ in range(max(0, due - seq)):
                    await producer.send(topic, _payload(seq, payload_bytes), key=f"k{seq % 97}".encode())
                    seq += 1
                await asyncio.sleep(tick)

        reader = asyncio.create_task(read())
        load = asyncio.create_task(background())
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            await asyncio.sleep(0.5)  # the load is flowing before the first probe
            probes = int(seconds / probe_interval_s)
            for i in range(probes):
                sent[base + i] = time.perf_counter()
                await producer.send(topic, _payload(base + i, payload_bytes), key=f"probe{i % 97}".encode())
                await asyncio.sleep(probe_interval_s)
            # Back to back, the reader may catch up with every probe sent so far: only the
            # last probe's return (or an earlier one's, if it came back last) ends the wait.
            all_sent = True
            if not sent:
                all_back.set()
            async with asyncio.timeout(30):
                await all_back.wait()
        finally:
            for task in (load, reader):
                task.cancel()
            await asyncio.wait({load, reader})
    return LoadedRoundTrip(records_per_s, partitions, percentile(samples, 50), percentile(samples, 99), len(samples))


def format_table(result: BaselineResult) -> str:
    broker = "embedded Tansu" if result.embedded else "Kafka"
    rows = [
        ("broker", f"{result.bootstrap} ({broker})"),
        ("messages", f"{result.messages} x {result.payload_bytes} B, 1 partition"),
        ("round trip p50", f"{result.p50_ms:.2f} ms"),
        ("round trip p99", f"{result.p99_ms:.2f} ms"),
        ("throughput", f"{result.msgs_per_s:,.0f} msg/s"),
    ]
    width = max(len(label) for label, _ in rows)
    lines = ["Kafka baseline: raw aiokafka produce -> consume", "-" * 48]
    lines += [f"{label:<{width}}  {value}" for label, value in rows]
    return "\n".join(lines)


def _print_progress(phase: str, done: int, total: int) -> None:
    print(f"  {phase:<8} {done:>6}/{total}", file=sys.stderr, flush=True)


async def _run(args: argparse.Namespace) -> BaselineResult:
    bootstrap = args.bootstrap or os.environ.get(BOOTSTRAP_ENV)
    if bootstrap:
        embedded = (
            args.embedded or KafkaSettings.model_validate({"in_memory": os.environ.get(EMBEDDED_ENV, False)}).in_memory
        )
        print(f"measuring {bootstrap} ...", file=sys.stderr)
        return await measure_baseline(
            bootstrap, args.messages, embedded=embedded, payload_bytes=args.payload_bytes, progress=_print_progress
        )
    async with EmbeddedBroker() as broker:
        print(f"started embedded broker on {broker.bootstrap_servers} ...", file=sys.stderr)
        return await measure_baseline(
            broker.bootstrap_servers,
            args.messages,
            embedded=True,
            payload_bytes=args.payload_bytes,
            progress=_print_progress,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_baseline", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help=f"broker to measure (default ${BOOTSTRAP_ENV}; neither: embedded Tansu)")
    parser.add_argument("-n", "--messages", type=int, default=2000, help="messages per phase (default 2000)")
    parser.add_argument("--payload-bytes", type=int, default=256, help="value size (default 256)")
    parser.add_argument("--embedded", action="store_true", help="the --bootstrap broker is Tansu: apply its tuning")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    args = parser.parse_args(argv)
    result = asyncio.run(_run(args))
    print(json.dumps(asdict(result)) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
