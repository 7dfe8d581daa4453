"""A message's path to its model request, per hop, beside the raw broker round trip of the same run.

    uv run python -m bench.message_path                              # embedded Tansu, PostgreSQL, 1/20/100
    uv run python -m bench.message_path --database sqlite --levels 1 20
    uv run python -m bench.message_path --broker kafka               # a 1-node Apache Kafka on the JVM

The stack runs as deployed: ingress, agent-runner, persistence and delivery each as its own
`agentstream serve` process (`bench.service_process`), 4 partitions per topic, dedupe and an
allowlist on, a model server in its own process (`bench.lean_model`, which records when each
request arrives and when it sent its first token) and a fake Telegram Bot API in this process
(which records when each call arrives). This process produces InboundMessages to `inbound`, as a
platform gateway would: `--levels` conversations at once, each sending its next message `--gap`
seconds after its previous run finished (a user reading the answer, so idle consumers go idle).

Per run, from the `Arrival` the runner copies onto `run.started` (docs/topics.md) and the two
servers' clocks (one machine: one clock), p50 / p99 of:

- produce → ingress read (this process's send → ingress's batch handler);
- ingress read → `runs` produced (the `runs` record's timestamp: millisecond resolution);
- `runs` produced → runner read;
- runner read → model request (the model server's arrival time);
- produce → model request (the sum: what a chat user waits before the model starts);
- model's first token → first platform call showing the answer.

Targets (docs/decisions.md): produce → model request ≤ 30 ms p50 at 1 and 20 conversations on
the embedded broker, ≤ 50 ms on Apache Kafka.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentstream.config import load_settings
from agentstream.contracts import Arrival, InboundMessage, RunEventAdapter, User
from agentstream.db import upgrade
from agentstream.kafka import EmbeddedBroker, create_topics
from agentstream.kafka.flavor import tuning
from agentstream.kafka.near_doorbell import notify_near
from agentstream_testing.fake_platforms import FakeTelegram

if __package__ in (None, ""):  # run as a file (`python bench/x.py`): make `bench` importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.ingress_throughput import PG_ADMIN_DEFAULT, PG_ADMIN_ENV, temporary_pg_database  # noqa: E402
from bench.kafka_baseline import BaselineResult, measure_baseline, percentile  # noqa: E402
from bench.run_overhead import FakeModelProcess  # noqa: E402
from bench.service_process import ServiceProcess, base_config  # noqa: E402

SERVICES = ("ingress", "agent-runner", "persistence", "delivery")
TOKEN_ENV = "AGENTSTREAM_BENCH_TELEGRAM_TOKEN"
TOKEN = "123:BENCH"
CALL_SECRET_ENV = "AGENTSTREAM_TOOL_CALL_SECRET"
TEXT_METHODS = frozenset({"sendMessage", "sendMessageDraft", "editMessageText"})
HOPS = (
    ("produce → ingress read", "produced", "ingress_read"),
    ("ingress read → runs produced", "ingress_read", "runs_produced"),
    ("runs produced → runner read", "runs_produced", "runner_read"),
    ("runner read → model request", "runner_read", "model_request"),
    ("produce → model request", "produced", "model_request"),
    ("first token → first platform call", "first_token", "platform_call"),
)
TARGET_MS = {"embedded": 30.0, "kafka": 50.0}
TOTAL = "produce → model request"


@dataclass
class Marks:
    """One message's way, in epoch seconds (None: not seen)."""

    produced: float
    run_id: str | None = None
    ingress_read: float | None = None
    runs_produced: float | None = None
    runner_read: float | None = None
    model_request: float | None = None
    first_token: float | None = None
    platform_call: float | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def hop_ms(self, start: str, end: str) -> float | None:
        a, b = getattr(self, start), getattr(self, end)
        return (b - a) * 1000 if a is not None and b is not None else None


@dataclass(frozen=True)
class HopFigure:
    hop: str
    p50_ms: float
    p99_ms: float
    samples: int


@dataclass(frozen=True)
class PathLevel:
    conversations: int
    runs: int
    hops: list[HopFigure]

    def p50(self, hop: str) -> float:
        return next(h.p50_ms for h in self.hops if h.hop == hop)


@dataclass(frozen=True)
class PathReport:
    broker: str
    database: str
    raw_p50_ms: float
    raw_p99_ms: float
    levels: list[PathLevel]
    load: str

    @property
    def target_ms(self) -> float:
        return TARGET_MS["kafka" if self.broker == "kafka" else "embedded"]


class Watch:
    """Reads `events` (every partition, no group) and marks each message's `run.queued`, `run.started`, `run.finished`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, fetch_wait_ms: int) -> None:
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, fetch_max_wait_ms=fetch_wait_ms
        )
        self.topic, self.partitions = topic, partitions
        self.by_inbound: dict[str, Marks] = {}
        self.by_run: dict[str, Marks] = {}
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watch:
        await self.consumer.start()
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        self.consumer.assign(tps)
        await self.consumer.seek_to_end(*tps)
        self.task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait({self.task})
        await self.consumer.stop()

    async def _read(self) -> None:
        while True:
            for records in (await self.consumer.getmany(timeout_ms=100)).values():
                for record in records:
                    self.mark(RunEventAdapter.validate_json(record.value or b"{}"))

    def mark(self, event: Any) -> None:
        if event.type == "run.queued" and event.inbound_id in self.by_inbound:
            queued = self.by_inbound[event.inbound_id]
            queued.run_id = event.run_id
            self.by_run[event.run_id] = queued
            return
        marks = self.by_run.get(event.run_id)
        if marks is None:
            return
        if event.type == "run.started":
            arrival: Arrival = event.arrival or Arrival()
            marks.ingress_read, marks.runs_produced = arrival.ingress_read_at, arrival.runs_produced_at
            marks.runner_read = arrival.runner_read_at
        elif event.type == "run.finished":
            marks.finished.set()


class Stack:
    """The four services on one broker and database, the model server, the fake Telegram."""

    def __init__(self, bootstrap: str, embedded: bool, db_url: str, tokens: int, rate: float) -> None:
        self.bootstrap, self.embedded, self.db_url = bootstrap, embedded, db_url
        self.tokens, self.rate = tokens, rate
        self.users = [f"bench-user-{i}" for i in range(200)]
        self.telegram = FakeTelegram(TOKEN)
        self.clock_offset = time.time() - time.monotonic()  # monotonic (the servers' clock) → epoch

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[tuple[FakeModelProcess, Watch, AIOKafkaProducer, str]]:
        os.environ[TOKEN_ENV] = TOKEN
        os.environ.setdefault(CALL_SECRET_ENV, secrets.token_hex(32))  # runners sign tool calls (docs/tools.md)
        async with contextlib.AsyncExitStack() as stack:
            fake = await stack.enter_async_context(FakeModelProcess(token_delay_s=1 / self.rate))
            await stack.enter_async_context(self.telegram)
            config = base_config(self.bootstrap, self.embedded, self.db_url) | {
                "default_connector": "lean",
                "connectors": [{"id": "lean", "type": "openai", "base_url": fake.base_url, "model": "bench"}],
                "platforms": {"telegram": {"api_url": self.telegram.url, "token_env": TOKEN_ENV}},
                "authz": {"default": {"allow_all": False, "users": self.users}, "rate_limit": {"enabled": False}},
            }
            settings = load_settings(**config)
            await upgrade(self.db_url)
            await create_topics(settings.kafka)
            for name in SERVICES:
                await stack.enter_async_context(ServiceProcess(name, config))
            flavor = tuning(settings.kafka)
            watch = await stack.enter_async_context(
                Watch(self.bootstrap, settings.topic("events"), settings.kafka.partitions, flavor.fetch_max_wait_ms)
            )
            producer = AIOKafkaProducer(
                bootstrap_servers=self.bootstrap, enable_idempotence=flavor.idempotent, acks="all", linger_ms=0
            )
            await producer.start()
            stack.push_async_callback(producer.stop)
            yield fake, watch, producer, settings.topic("inbound")

    async def conversation(
        self, index: int, runs: int, gap_s: float, watch: Watch, producer: AIOKafkaProducer, inbound: str
    ) -> list[Marks]:
        done: list[Marks] = []
        chat = f"{index}{uuid.uuid4().hex[:6]}"
        words = " ".join(["token"] * (self.tokens - 1))
        for _ in range(runs):
            ident = f"m{uuid.uuid4().hex[:12]}"
            message = InboundMessage(
                id=ident, platform="telegram", chat_id=chat, user=User(id=self.users[index % len(self.users)]),
                text=f"{ident} {words}",
            )  # fmt: skip
            value, key = message.model_dump_json().encode(), message.conversation_key.encode()
            marks = watch.by_inbound[ident] = Marks(produced=time.time())
            delivered = await producer.send(inbound, value, key=key)
            if self.embedded:  # as `agentstream send` does: ingress wakes at the ack (kafka/near_doorbell.py)
                delivered.add_done_callback(lambda _: notify_near(self.bootstrap, inbound))
            async with asyncio.timeout(60):
                await marks.finished.wait()
            done.append(marks)
            await asyncio.sleep(gap_s)
        return done

    def first_shown(self) -> dict[str, float]:
        """When each message's answer was first sent to the platform (the answer starts with the message's id)."""
        shown: dict[str, float] = {}
        for call in self.telegram.calls:
            text = str(call.body.get("text", ""))
            if call.method in TEXT_METHODS and text:
                shown.setdefault(text.split(" ", 1)[0], call.at)
        return shown

    async def shown_all(self, runs: Sequence[Marks], watch: Watch, within_s: float = 15.0) -> None:
        """Wait until every run's answer reached the platform: a run's ending can come before delivery's
        first call on a loaded machine. One never shown stays without that hop."""
        ident_of = {id(m): i for i, m in watch.by_inbound.items()}
        wanted = {ident_of[id(m)] for m in runs}
        for _ in range(int(within_s / 0.05)):  # the fake platform records calls; nothing to wait on but them
            if wanted <= self.first_shown().keys():
                return
            await asyncio.sleep(0.05)

    async def server_marks(self, fake: FakeModelProcess, runs: Sequence[Marks], watch: Watch) -> None:
        """The model server's and the platform's times of each run (both on this machine's monotonic clock)."""
        requests = await fake.timings()
        shown = self.first_shown()
        ident_of = {id(m): i for i, m in watch.by_inbound.items()}
        for marks in runs:
            ident = ident_of[id(marks)]
            request = requests.get(ident, {})
            if (received := request.get("received_at")) is not None:
                marks.model_request = received + self.clock_offset
            if (first := request.get("first_token_at")) is not None:
                marks.first_token = first + self.clock_offset
            if ident in shown:
                marks.platform_call = shown[ident] + self.clock_offset


def figures(runs: Sequence[Marks]) -> list[HopFigure]:
    out = []
    for name, start, end in HOPS:
        values = [v for m in runs if (v := m.hop_ms(start, end)) is not None]
        out.append(HopFigure(name, percentile(values, 50), percentile(values, 99), len(values)) if values else None)
    return [f for f in out if f is not None]


async def measure(
    bootstrap: str,
    embedded: bool,
    db_url: str,
    *,
    broker: str,
    levels: Sequence[int] = (1, 20, 100),
    min_runs: int = 20,
    gap_s: float = 1.0,
    tokens: int = 20,
    rate: float = 100.0,
    baseline_messages: int = 500,
    baseline: BaselineResult | None = None,
) -> PathReport:
    """`baseline`: the raw broker's, measured in this run already (else measured here first)."""
    baseline = baseline or await measure_baseline(bootstrap, baseline_messages, embedded=embedded)
    stack = Stack(bootstrap, embedded, db_url, tokens, rate)
    results = []
    async with stack.running() as (fake, watch, producer, inbound):
        await stack.conversation(0, 2, 0.0, watch, producer, inbound)  # warm-up: groups joined, connections open
        for level in levels:
            rounds = -(-max(min_runs, level) // level)

            async def one(i: int, rounds: int = rounds, level: int = level) -> list[Marks]:
                await asyncio.sleep(i * gap_s / level)  # spread: messages arrive evenly
                return await stack.conversation(i, rounds, gap_s, watch, producer, inbound)

            runs = [m for ms in await asyncio.gather(*(one(i) for i in range(level))) for m in ms]
            await stack.shown_all(runs, watch)
            await stack.server_marks(fake, runs, watch)
            results.append(PathLevel(level, len(runs), figures(runs)))
    return PathReport(
        broker, db_url.split("+", 1)[0].split(":", 1)[0], baseline.p50_ms, baseline.p99_ms, results, load_average()
    )


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def format_report(report: PathReport) -> str:
    lines = [
        f"Message path ({report.broker} broker, {report.database}; load average {report.load})",
        f"raw round trip p50 / p99: {report.raw_p50_ms:.2f} / {report.raw_p99_ms:.2f} ms (same run)",
        "",
        f"{'hop':<36} " + " ".join(f"{f'{lv.conversations} conv p50 / p99':>22}" for lv in report.levels),
    ]
    for name, _, _ in HOPS:
        cells = []
        for level in report.levels:
            hop = next((h for h in level.hops if h.hop == name), None)
            cells.append(f"{hop.p50_ms:>9.1f} / {hop.p99_ms:>7.1f} ms" if hop else f"{'—':>22}")
        lines.append(f"{name:<36} " + " ".join(cells))
    lines.append("")
    for level in report.levels:
        p50 = level.p50(TOTAL)
        verdict = "ok" if p50 <= report.target_ms else f"above the {report.target_ms:.0f} ms target"
        ratio = p50 / report.raw_p50_ms if report.raw_p50_ms else 0.0
        lines.append(
            f"{level.conversations} conversation(s), {level.runs} runs: produce → model request p50 {p50:.1f} ms "
            f"= {ratio:.1f}× the raw round trip ({verdict})"
        )
    return "\n".join(lines)


@contextlib.asynccontextmanager
async def on_broker(broker: str, bootstrap: str | None) -> AsyncIterator[tuple[str, bool]]:
    """(bootstrap, is Tansu): `--bootstrap`, else an embedded Tansu or a 1-node Apache Kafka on the JVM."""
    if bootstrap:
        yield bootstrap, broker == "embedded"
    elif broker == "kafka":
        from agentstream_testing.kafka_jvm import KafkaJvmCluster

        cluster = KafkaJvmCluster(nodes=1)
        await asyncio.to_thread(cluster.start)
        try:
            yield cluster.bootstrap_servers, False
        finally:
            await asyncio.to_thread(cluster.stop)
    else:
        async with EmbeddedBroker() as embedded:
            yield embedded.bootstrap_servers, True


@contextlib.asynccontextmanager
async def database(kind: str) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{Path(tempfile.mkdtemp(prefix='agentstream-bench-')) / 'bench.db'}"
        return
    async with temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)) as url:
        yield url


async def run(args: argparse.Namespace) -> PathReport:
    async with on_broker(args.broker, args.bootstrap) as (bootstrap, embedded), database(args.database) as db_url:
        return await measure(
            bootstrap, embedded, db_url, broker=args.broker, levels=args.levels, min_runs=args.min_runs, gap_s=args.gap
        )


def main(argv: Sequence[str] | None = None) -> int:
    import structlog

    parser = argparse.ArgumentParser(prog="python -m bench.message_path", description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=["embedded", "kafka"], default="embedded")
    parser.add_argument("--bootstrap", help="an external broker of --broker's kind instead of starting one")
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 20, 100], help="conversations at once")
    parser.add_argument("--min-runs", type=int, default=20, help="runs measured per level at least")
    parser.add_argument("--gap", type=float, default=1.0, help="seconds a conversation waits after an answer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    report = asyncio.run(run(args))
    print(json.dumps(asdict(report)) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
