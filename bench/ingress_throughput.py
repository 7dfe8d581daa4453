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
from bench.service_process import ServiceProcess, cpu_seconds  # noqa: E402

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
    # The other processes on the records' way over the same records (None: not measured):
    broker_cpu_s: float | None = None  # the broker's process (Tansu, or the Kafka JVM)
    database_cpu_s: float | None = None  # the PostgreSQL backends serving the benchmark's database
    driver_cpu_s: float | None = None  # this process: producing `inbound`, reading `runs` (and ingress, in-process)

    def per_record_us(self, cpu_s: float | None) -> float | None:
        return cpu_s / self.runs_received * 1e6 if cpu_s is not None and self.runs_received else None

    def other_cpu(self) -> dict[str, float | None]:
        """CPU seconds of the other processes on the records' way, by name."""
        return {"broker": self.broker_cpu_s, "database": self.database_cpu_s, "driver": self.driver_cpu_s}

    @property
    def cpu_us_per_msg(self) -> float | None:
        return self.per_record_us(self.ingress_cpu_s) if self.ingress_cpu_s else None

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


INBOUND_ID = b'"inbound_id":"'


def inbound_id(value: bytes) -> str | None:
    """A StartRun's `inbound_id`, found in its bytes: the driver reads every run ingress writes and
    shares the machine's cores with it, and decoding each one (~600 bytes of JSON) cost more of
    the driver's CPU than its producing and fetching together. The ids the driver gives
    (`bench-<n>`) need no JSON escape; anything else is decoded."""
    at = value.find(INBOUND_ID)
    if at >= 0:
        start = at + len(INBOUND_ID)
        end = value.find(b'"', start)
        if end > start and value.find(b"\\", start, end) < 0:
            return value[start:end].decode()
    found = json.loads(value).get("inbound_id")
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class Pumped:
    received: int  # StartRuns of these records read back
    seconds: float  # first produce to last StartRun read
    driver_cpu_s: float  # this process's CPU time over those seconds


async def _pump(settings: Settings, first: int, n: int, timeout_s: float) -> Pumped:
    """Produce records first..first+n pipelined; count their StartRuns on `runs`."""
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
        started, cpu_started = time.perf_counter(), time.process_time()
        sends = []
        for value, key in records:
            sends.append(await producer.send(inbound, value, key=key))  # pipelined: acks awaited at the end
        expected = {f"bench-{first + i}" for i in range(n)}
        received = 0
        async with asyncio.timeout(timeout_s):
            while received < n:
                batch = await consumer.getmany(timeout_ms=100)
                # Count only this round's runs: the end offset a fresh consumer starts from is not exact.
                received += sum(inbound_id(r.value) in expected for records in batch.values() for r in records)
        await asyncio.gather(*sends)
        return Pumped(received, time.perf_counter() - started, time.process_time() - cpu_started)
    finally:
        await consumer.stop()
        await producer.stop()


CpuClock = Callable[[], float | None]  # CPU seconds used so far by the ingress process, if known


def process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds process `pid` has used so far; None if it is not known or not on this machine."""
    if pid is None:
        return None
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return None


LOCAL_HOSTS = {None, "", "127.0.0.1", "localhost", "::1"}


def database_cpu_s(db_url: str) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend connected to `db_url`'s database, but the
    one asking; empty unless the server is on this machine (/proc)."""
    import psycopg
    from sqlalchemy.engine import make_url

    if make_url(db_url).host not in LOCAL_HOSTS:
        return {}
    url = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
    except psycopg.Error:
        return {}
    return {pid: used for (pid,) in rows if (used := process_cpu_s(pid)) is not None}


def spent(before: float | None, after: float | None) -> float | None:
    return after - before if before is not None and after is not None else None


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
    broker_pid: int | None = None,
) -> IngressResult:
    """Run one ingress against `bootstrap` and `db_url` and time `n` records through it.

    The service runs in its own process (`in_process=False`, as deployed) or in this one.
    `broker_pid`: the broker's process, if on this machine (its CPU over the records is reported)."""
    baseline = baseline or await measure_baseline(bootstrap, n, embedded=embedded)
    settings = bench_settings(bootstrap, db_url, embedded)
    await create_topics(settings.kafka)
    async with ingress_running(settings, in_process) as cpu:
        await _pump(settings, 0, warmup, timeout_s)  # group joined, connections and caches warm
        database_before = await asyncio.to_thread(database_cpu_s, db_url)
        cpu_before, broker_before = cpu(), process_cpu_s(broker_pid)
        pumped = await _pump(settings, warmup, n, timeout_s)
        cpu_after, broker_after = cpu(), process_cpu_s(broker_pid)
        database_after = await asyncio.to_thread(database_cpu_s, db_url)
    # A backend that connected during the run counts from zero; one that left is not counted.
    database_s = sum(used - database_before.get(pid, 0.0) for pid, used in database_after.items())
    return IngressResult(
        messages=n,
        runs_received=pumped.received,
        seconds=pumped.seconds,
        msgs_per_s=pumped.received / pumped.seconds,
        baseline_msgs_per_s=baseline.msgs_per_s,
        database=db_url.split("://", 1)[0],
        ingress_cpu_s=spent(cpu_before, cpu_after),
        broker_cpu_s=spent(broker_before, broker_after),
        database_cpu_s=database_s if database_after else None,
        driver_cpu_s=pumped.driver_cpu_s,
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
    names = {
        "database": "PostgreSQL",
        "driver": "driver" if result.ingress_cpu_s is not None else "driver with ingress",
    }
    others = [
        f"{names.get(what, what)} {us:,.0f}"
        for what, cpu_s in result.other_cpu().items()
        if (us := result.per_record_us(cpu_s)) is not None
    ]
    if others:  # where the rest of the machine's CPU went over the same records
        rows.append(("other CPU", ", ".join(others) + " us per record"))
    width = max(len(label) for label, _ in rows)
    lines = ["Ingress throughput", "-" * 48] + [f"{label:<{width}}  {value}" for label, value in rows]
    return "\n".join(lines)


@asynccontextmanager
async def broker_running(broker: str) -> AsyncIterator[tuple[str, bool, int | None]]:
    """(bootstrap, is Tansu, the broker's pid): an embedded Tansu, or a 1-node Apache Kafka on the JVM."""
    if broker == "kafka":
        from agentstream_testing.kafka_jvm import KafkaJvmCluster

        cluster = KafkaJvmCluster(nodes=1)
        await asyncio.to_thread(cluster.start)
        try:
            process = cluster.nodes[0].process
            yield cluster.bootstrap_servers, False, process.pid if process is not None else None
        finally:
            await asyncio.to_thread(cluster.stop)
    else:
        async with EmbeddedBroker() as embedded:
            yield embedded.bootstrap_servers, True, embedded.pid


async def _run(args: argparse.Namespace) -> IngressResult:
    async with broker_running(args.broker) as (bootstrap, embedded, broker_pid):
        print(f"{args.broker} broker on {bootstrap}; measuring the raw baseline ...", file=sys.stderr)
        baseline = await measure_baseline(bootstrap, args.messages, embedded=embedded)
        db_url = args.database_url or os.environ.get("AGENTSTREAM__DATABASE__URL")
        where = "in this process" if args.in_process else "in its own process"

        async def measure(url: str) -> IngressResult:
            print(f"measuring ingress ({where}) ...", file=sys.stderr)
            return await measure_ingress(
                bootstrap,
                url,
                args.messages,
                embedded=embedded,
                baseline=baseline,
                in_process=args.in_process,
                broker_pid=broker_pid,
            )

        if db_url:
            return await measure(db_url)
        async with temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)) as url:
            return await measure(url)


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
        json.dumps(
            asdict(result)
            | {"ratio": result.ratio, "cpu_us_per_msg": result.cpu_us_per_msg}
            | {f"{what}_cpu_us_per_msg": result.per_record_us(cpu_s) for what, cpu_s in result.other_cpu().items()}
        )
        if args.json
        else format_table(result)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
