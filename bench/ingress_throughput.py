"""Ingress throughput: valid inbound records per second through ingress to `runs`.

Dedupe (every record is a new (platform, id) row) and authorization (an allowlist the
users are on) are on, on PostgreSQL; the figure is reported beside the raw broker
throughput of `bench.kafka_baseline`, measured in the same run on the same broker.
Target: ingress >= 30% of raw.

    uv run python -m bench.ingress_throughput                     # embedded Tansu + local PostgreSQL
    uv run python -m bench.ingress_throughput -n 5000 --database-url postgresql+psycopg://u:p@host/db

Without `--database-url` (or AGENTSTREAM__DATABASE__URL) a throw-away database is
created on the server named by AGENTSTREAM_TEST_PG (default the local server) and
dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentstream.config import Settings, load_settings
from agentstream.contracts import InboundMessage, User
from agentstream.host import ServiceHost
from agentstream.kafka import EmbeddedBroker, create_topics, free_port
from agentstream_ingress import IngressService

if __package__ in (None, ""):  # run as a file (`python bench/x.py`): make `bench` importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.kafka_baseline import BaselineResult, measure_baseline  # noqa: E402

PG_ADMIN_ENV = "AGENTSTREAM_TEST_PG"
PG_ADMIN_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
USERS = [f"bench-user-{i}" for i in range(50)]
TARGET_RATIO = 0.30


@dataclass(frozen=True)
class IngressResult:
    messages: int
    runs_received: int
    seconds: float
    msgs_per_s: float
    baseline_msgs_per_s: float
    database: str

    @property
    def ratio(self) -> float:
        return self.msgs_per_s / self.baseline_msgs_per_s if self.baseline_msgs_per_s else 0.0


def bench_settings(bootstrap: str, db_url: str, embedded: bool) -> Settings:
    """Dedupe is always on; authz is an allowlist (the path a production config takes)."""
    return load_settings(
        kafka={"bootstrap_servers": bootstrap, "topic_prefix": f"bench{uuid.uuid4().hex[:8]}.", "partitions": 1,
               "embedded": embedded},
        database={"url": db_url},
        authz={"default": {"allow_all": False, "users": USERS}, "rate_limit": {"enabled": False}},
    )


def _record(seq: int) -> tuple[bytes, bytes]:
    msg = InboundMessage(id=f"bench-{seq}", platform="bench", chat_id=f"chat-{seq % 64}",
                         user=User(id=USERS[seq % len(USERS)]), text=f"message {seq}")
    return msg.model_dump_json().encode(), msg.conversation_key.encode()


async def _pump(settings: Settings, first: int, n: int, timeout_s: float) -> tuple[int, float]:
    """Produce records first..first+n pipelined; count StartRuns on `runs`; (received, seconds)."""
    inbound, runs = settings.topic("inbound"), settings.topic("runs")
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers,
                                enable_idempotence=settings.kafka.idempotence, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers, group_id=None,
                                enable_auto_commit=False, fetch_max_wait_ms=settings.kafka.fetch_wait_ms)
    await producer.start()
    await consumer.start()
    try:
        tp = TopicPartition(runs, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        started = time.perf_counter()
        sends = []
        for i in range(n):
            value, key = _record(first + i)
            sends.append(await producer.send(inbound, value, key=key))  # pipelined: acks awaited at the end
        expected = {f"bench-{first + i}" for i in range(n)}
        received = 0
        async with asyncio.timeout(timeout_s):
            while received < n:
                batch = await consumer.getmany(timeout_ms=100)
                # Count only this round's runs: the end offset a fresh consumer starts from is not exact.
                received += sum(json.loads(r.value).get("inbound_id") in expected
                                for records in batch.values() for r in records)
        await asyncio.gather(*sends)
        return received, time.perf_counter() - started
    finally:
        await consumer.stop()
        await producer.stop()


async def measure_ingress(bootstrap: str, db_url: str, n: int = 2000, *, embedded: bool = False,
                          baseline: BaselineResult | None = None, warmup: int = 50,
                          timeout_s: float = 120.0) -> IngressResult:
    """Run one ingress against `bootstrap` and `db_url` and time `n` records through it."""
    baseline = baseline or await measure_baseline(bootstrap, n, embedded=embedded)
    settings = bench_settings(bootstrap, db_url, embedded)
    await create_topics(settings.kafka)
    svc = IngressService(settings)
    async with ServiceHost([svc], "127.0.0.1", {"ingress": free_port()}):
        await _pump(settings, 0, warmup, timeout_s)  # group joined, connections and caches warm
        received, seconds = await _pump(settings, warmup, n, timeout_s)
    return IngressResult(messages=n, runs_received=received, seconds=seconds, msgs_per_s=received / seconds,
                         baseline_msgs_per_s=baseline.msgs_per_s, database=db_url.split("://", 1)[0])


@asynccontextmanager
async def temporary_pg_database(admin_url: str) -> AsyncIterator[str]:
    import psycopg

    name = f"as_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        base = admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def format_table(result: IngressResult) -> str:
    verdict = "ok" if result.ratio >= TARGET_RATIO else f"below the {TARGET_RATIO:.0%} target"
    rows = [
        ("records", f"{result.messages} valid InboundMessages, dedupe + allowlist on ({result.database})"),
        ("raw broker", f"{result.baseline_msgs_per_s:,.0f} msg/s (bench.kafka_baseline, same run)"),
        ("ingress", f"{result.msgs_per_s:,.0f} msg/s inbound -> runs"),
        ("ratio", f"{result.ratio:.0%} of raw ({verdict})"),
    ]
    width = max(len(label) for label, _ in rows)
    lines = ["Ingress throughput", "-" * 48] + [f"{label:<{width}}  {value}" for label, value in rows]
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> IngressResult:
    async with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        print(f"embedded broker on {bootstrap}; measuring the raw baseline ...", file=sys.stderr)
        baseline = await measure_baseline(bootstrap, args.messages, embedded=True)
        db_url = args.database_url or os.environ.get("AGENTSTREAM__DATABASE__URL")
        if db_url:
            return await measure_ingress(bootstrap, db_url, args.messages, embedded=True, baseline=baseline)
        async with temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)) as url:
            print("measuring ingress ...", file=sys.stderr)
            return await measure_ingress(bootstrap, url, args.messages, embedded=True, baseline=baseline)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingress_throughput", description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=2000, help="records (default 2000)")
    parser.add_argument("--database-url", help="PostgreSQL URL (default: a throw-away database)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    result = asyncio.run(_run(args))
    print(json.dumps(asdict(result) | {"ratio": result.ratio}) if args.json else format_table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
