"""Ingress throughput: valid inbound records per second through ingress to `runs`.

Dedupe (every record is a new (platform, id) row) and authorization (an allowlist the
users are on) are on, on PostgreSQL; the figure is reported beside the raw broker
throughput of `bench.kafka_baseline`, measured in the same run on the same broker.
Target: ingress >= 50% of raw, on the embedded broker and on Apache Kafka (`--broker kafka`).

Ingress runs as a deployment runs it: its own `agentstream serve ingress` process
(`bench.service_process`) with this run's settings as its config file. This process is
only the driver (one producer writing `inbound`, one consumer reading `runs`: the work
the raw baseline does in one process), so the load generator does not share the
service's event loop or the CPU time measured for it. `--in-process` runs the service
inside the driver instead (the old way; for comparison and profiling).

    uv run python -m bench.ingress_throughput                     # embedded Tansu + local PostgreSQL
    uv run python -m bench.ingress_throughput --broker kafka      # a 1-node Apache Kafka on the JVM
    uv run python -m bench.ingress_throughput -n 5000 --database-url postgresql+psycopg://u:p@host/db
    uv run python -m bench.ingress_throughput --http              # POST /v1/messages with vs without auth

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
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentstream.config import Settings, load_settings
from agentstream.contracts import InboundMessage, User
from agentstream.host import ServiceHost
from agentstream.kafka import EmbeddedBroker, create_topics, free_port
from agentstream.kafka.flavor import tuning
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress

if __package__ in (None, ""):  # run as a file (`python bench/x.py`): make `bench` importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.ingress_http import Credential, HttpResult, format_http_table, measure_http  # noqa: E402
from bench.kafka_baseline import BaselineResult, measure_baseline  # noqa: E402
from bench.service_process import ServiceProcess  # noqa: E402

PG_ADMIN_ENV = "AGENTSTREAM_TEST_PG"
PG_ADMIN_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"
USERS = [f"bench-user-{i}" for i in range(50)]
TARGET_RATIO = 0.50


@dataclass(frozen=True)
class IngressResult:
    messages: int
    runs_received: int
    seconds: float
    msgs_per_s: float
    baseline_msgs_per_s: float
    database: str
    ingress_cpu_s: float | None = None  # CPU seconds the ingress process spent on the timed records

    @property
    def cpu_us_per_msg(self) -> float | None:
        return self.ingress_cpu_s / self.runs_received * 1e6 if self.ingress_cpu_s and self.runs_received else None

    @property
    def ratio(self) -> float:
        return self.msgs_per_s / self.baseline_msgs_per_s if self.baseline_msgs_per_s else 0.0


def bench_settings(bootstrap: str, db_url: str, embedded: bool, extra_users: Sequence[str] = ()) -> Settings:
    """Dedupe is always on; authz is an allowlist (the path a production config takes)."""
    return load_settings(
        kafka={
            "bootstrap_servers": bootstrap,
            "topic_prefix": f"bench{uuid.uuid4().hex[:8]}.",
            "partitions": 1,
            "in_memory": embedded,
        },
        database={"url": db_url},
        authz={"default": {"allow_all": False, "users": [*USERS, *extra_users]}, "rate_limit": {"enabled": False}},
    )


def _record(seq: int) -> tuple[bytes, bytes]:
    msg = InboundMessage(
        id=f"bench-{seq}",
        platform="bench",
        chat_id=f"chat-{seq % 64}",
        user=User(id=USERS[seq % len(USERS)]),
        text=f"message {seq}",
    )
    return msg.model_dump_json().encode(), msg.conversation_key.encode()


async def _pump(settings: Settings, first: int, n: int, timeout_s: float) -> tuple[int, float]:
    """Produce records first..first+n pipelined; count StartRuns on `runs`; (received, seconds)."""
    inbound, runs = settings.topic("inbound"), settings.topic("runs")
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        enable_idempotence=tuning(settings.kafka).idempotent,
        acks="all",
        linger_ms=0,
    )
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=tuning(settings.kafka).fetch_max_wait_ms,
    )
    await producer.start()
    await consumer.start()
    try:
        tp = TopicPartition(runs, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        records = [_record(first + i) for i in range(n)]  # made before the clock starts, like the baseline's
        started = time.perf_counter()
        sends = []
        for value, key in records:
            sends.append(await producer.send(inbound, value, key=key))  # pipelined: acks awaited at the end
        expected = {f"bench-{first + i}" for i in range(n)}
        received = 0
        async with asyncio.timeout(timeout_s):
            while received < n:
                batch = await consumer.getmany(timeout_ms=100)
                # Count only this round's runs: the end offset a fresh consumer starts from is not exact.
                received += sum(
                    json.loads(r.value).get("inbound_id") in expected for records in batch.values() for r in records
                )
        await asyncio.gather(*sends)
        return received, time.perf_counter() - started
    finally:
        await consumer.stop()
        await producer.stop()


CpuClock = Callable[[], float | None]  # CPU seconds used so far by the ingress process, if known


@asynccontextmanager
async def ingress_running(settings: Settings, in_process: bool) -> AsyncIterator[CpuClock]:
    if not in_process:  # the settings written out whole: the child runs exactly what is measured here
        async with ServiceProcess("ingress", settings.model_dump(mode="json")) as svc:
            yield svc.cpu_seconds
        return
    async with ServiceHost([bootstrap_ingress(settings)], "127.0.0.1", {"ingress": free_port()}):
        yield lambda: None  # the driver shares the process: no CPU figure of ingress alone


async def measure_ingress(
    bootstrap: str,
    db_url: str,
    n: int = 2000,
    *,
    embedded: bool = False,
    baseline: BaselineResult | None = None,
    warmup: int = 50,
    timeout_s: float = 120.0,
    in_process: bool = False,
) -> IngressResult:
    """Run one ingress against `bootstrap` and `db_url` and time `n` records through it.

    The service runs in its own process (`in_process=False`, as deployed) or in this one."""
    baseline = baseline or await measure_baseline(bootstrap, n, embedded=embedded)
    settings = bench_settings(bootstrap, db_url, embedded)
    await create_topics(settings.kafka)
    async with ingress_running(settings, in_process) as cpu:
        await _pump(settings, 0, warmup, timeout_s)  # group joined, connections and caches warm
        cpu_before = cpu()
        received, seconds = await _pump(settings, warmup, n, timeout_s)
        cpu_after = cpu()
    cpu_s = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    return IngressResult(
        messages=n,
        runs_received=received,
        seconds=seconds,
        msgs_per_s=received / seconds,
        baseline_msgs_per_s=baseline.msgs_per_s,
        database=db_url.split("://", 1)[0],
        ingress_cpu_s=cpu_s,
    )


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
    if result.cpu_us_per_msg is not None:
        rows.append(("ingress CPU", f"{result.cpu_us_per_msg:,.0f} us per record ({result.ingress_cpu_s:.2f} s)"))
    width = max(len(label) for label, _ in rows)
    lines = ["Ingress throughput", "-" * 48] + [f"{label:<{width}}  {value}" for label, value in rows]
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> IngressResult:
    from bench.message_path import on_broker

    async with on_broker(args.broker, None) as (bootstrap, embedded):
        print(f"{args.broker} broker on {bootstrap}; measuring the raw baseline ...", file=sys.stderr)
        baseline = await measure_baseline(bootstrap, args.messages, embedded=embedded)
        db_url = args.database_url or os.environ.get("AGENTSTREAM__DATABASE__URL")
        where = "in this process" if args.in_process else "in its own process"
        if db_url:
            print(f"measuring ingress ({where}) ...", file=sys.stderr)
            return await measure_ingress(
                bootstrap, db_url, args.messages, embedded=embedded, baseline=baseline, in_process=args.in_process
            )
        async with temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)) as url:
            print(f"measuring ingress ({where}) ...", file=sys.stderr)
            return await measure_ingress(
                bootstrap, url, args.messages, embedded=embedded, baseline=baseline, in_process=args.in_process
            )


async def _run_http(args: argparse.Namespace) -> HttpResult:
    async with EmbeddedBroker() as broker, AsyncExitStack() as stack:
        db_url = args.database_url or os.environ.get("AGENTSTREAM__DATABASE__URL")
        if not db_url:
            db_url = await stack.enter_async_context(
                temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT))
            )
        return await measure_http(
            lambda extra: bench_settings(broker.bootstrap_servers, db_url, True, extra),
            db_url,
            USERS,
            requests=args.messages,
            rounds=args.rounds,
            concurrency=args.concurrency,
            credential=Credential(args.credential),
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingress_throughput", description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=2000, help="records (default 2000)")
    parser.add_argument("--database-url", help="PostgreSQL URL (default: a throw-away database)")
    parser.add_argument("--broker", choices=["embedded", "kafka"], default="embedded", help="Tansu, or a JVM Kafka")
    parser.add_argument(
        "--in-process", action="store_true", help="run ingress inside the driver process (default: its own process)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    http = parser.add_argument_group("--http: POST /v1/messages with the credential check against without it")
    http.add_argument("--http", action="store_true", help="measure the HTTP front door instead (-n per round)")
    http.add_argument("--rounds", type=int, default=2, help="rounds per side, alternating which goes first")
    http.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    http.add_argument(
        "--credential",
        choices=[c.value for c in Credential],
        default=Credential.GATEWAY.value,
        help="a gateway key relaying the bench users (default) or a messages:write key",
    )
    args = parser.parse_args(argv)
    if args.http:
        http_result = asyncio.run(_run_http(args))
        print(json.dumps(http_result.to_json()) if args.json else format_http_table(http_result))
        return 1 if http_result.failed else 0
    result = asyncio.run(_run(args))
    print(
        json.dumps(asdict(result) | {"ratio": result.ratio, "cpu_us_per_msg": result.cpu_us_per_msg})
        if args.json
        else format_table(result)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
