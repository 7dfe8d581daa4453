"""Soak: the embedded stack under steady traffic for a bounded time; does anything creep?

    uv run python -m bench.soak                   # 100 conversations for 10 minutes
    uv run python -m bench.soak --minutes 30 --conversations 200 --interval 4
    uv run python -m bench.soak --pg              # the services on PostgreSQL ($AGENTSTREAM_TEST_PG)
    uv run python -m bench.soak --broker kafka    # on a 1-node Apache Kafka (JVM) instead of the embedded Tansu
    uv run python -m bench.soak --broker kafka --bootstrap 127.0.0.1:9092   # on an Apache Kafka already running

`agentstream up` runs in its own process (broker, SQLite, all five services; on Apache Kafka
`up --no-broker` given its address, `bench.soak_broker`) with the lean model
(`bench.lean_model`) as its only connector and a fake Telegram Bot API as the chats' platform.
Every conversation sends a message every `--interval` seconds (open loop: the load does not wait
for the stack), each answered by a `--tokens`-token stream. Every `--sample` seconds the soak
reads the stack's and the broker's resident memory (`/proc`) and, from every service's `/metrics`,
`agentstream_consumer_lag` (summed over groups and partitions), `agentstream_persistence_open_buffers`
and `agentstream_delivery_open_streams`, and, per group, the lag and the committed offset's age
(`agentstream_consumer_committed_offset_age_seconds`, worst partition: an age that climbs with the
clock is a commit held back, one that stays at seconds while the lag climbs is a group short of
capacity). It writes `report.md` and `soak.png` and FAILs (exit 1)
if a series grows without bound by the slope rule in `bench/README.md` (`grows`), or if no run
finished.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

if __package__ in (None, ""):  # run as a file (`python bench/soak.py`): make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentstream.contracts import InboundMessage, User  # noqa: E402
from agentstream_stack.embedded import free_ports  # noqa: E402
from agentstream_testing.fake_platforms import FakeTelegram  # noqa: E402
from bench.ingress_throughput import PG_ADMIN_DEFAULT, PG_ADMIN_ENV, temporary_pg_database  # noqa: E402
from bench.report import Curve, Series, plot  # noqa: E402
from bench.run_overhead import REPO_ROOT, FakeModelProcess  # noqa: E402
from bench.service_process import rss_bytes, terminate  # noqa: E402
from bench.soak_broker import EMBEDDED, KAFKA, SoakBroker, soak_broker  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
TOKEN_ENV, METRICS_ENV = "SOAK_TELEGRAM_TOKEN", "SOAK_METRICS_TOKEN"
# The stack's topics' partitions (`kafka.partitions`' default, written out): the soak reads every
# partition of `events`, and a fresh client's metadata cannot be asked for it (on Apache Kafka 4 the
# topics the consumer bootstrapped with are not in it, and `topics()` does not update it).
PARTITIONS = 4
LAG, BUFFERS, STREAMS, AGE = (
    "agentstream_consumer_lag",
    "agentstream_persistence_open_buffers",
    "agentstream_delivery_open_streams",
    "agentstream_consumer_committed_offset_age_seconds",
)


@dataclass(frozen=True)
class Limit:
    """A series grows without bound when its least-squares slope over the second half of the soak,
    times the second half's length, exceeds `relative` × its mean there, and `floor` too."""

    relative: float
    floor: float
    judged: bool = True  # False: sampled and plotted, never a FAIL (growth that is data, not a leak)


# What each sampled series may drift by over the second half without failing the soak.
BROKER_RSS = "broker RSS (MiB)"
LIMITS = {
    "stack RSS (MiB)": Limit(0.05, 8.0),
    # The embedded broker's storage is memory: it holds every record until retention (days), so its
    # RSS grows with the traffic by design. Kafka's JVM grows its heap up to its maximum before its
    # collector holds it there, longer than a short soak's warm-up. Shown, not judged.
    BROKER_RSS: Limit(0.10, 16.0, judged=False),
    "consumer lag (records)": Limit(0.5, 200.0),
    "persistence open buffers": Limit(0.5, 20.0),
    "delivery open streams": Limit(0.5, 20.0),
}


@dataclass(frozen=True)
class Verdict:
    series: str
    first: float
    last: float
    mean_second_half: float
    slope_per_min: float
    growth: float  # slope × the second half's length
    allowed: float
    judged: bool = True

    @property
    def grew(self) -> bool:
        return self.growth > self.allowed

    @property
    def failed(self) -> bool:
        return self.judged and self.grew


def slope(ts: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over ts (0 with fewer than two distinct times)."""
    if len(ts) < 2:
        return 0.0
    mt, my = statistics.fmean(ts), statistics.fmean(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys, strict=True)) / var if var else 0.0


def grows(name: str, ts: list[float], ys: list[float], limit: Limit) -> Verdict:
    """The slope test on the second half of the samples (the first half is warm-up: caches, pools)."""
    half = ts[0] + (ts[-1] - ts[0]) / 2
    tail = [(t, y) for t, y in zip(ts, ys, strict=True) if t >= half]
    tt, ty = [t for t, _ in tail], [y for _, y in tail]
    per_s = slope(tt, ty)
    mean = statistics.fmean(ty) if ty else 0.0
    growth = per_s * (tt[-1] - tt[0]) if tt else 0.0
    allowed = max(limit.relative * abs(mean), limit.floor)
    return Verdict(name, ys[0], ys[-1], mean, per_s * 60, growth, allowed, limit.judged)


@dataclass
class Samples:
    t: list[float] = field(default_factory=list)  # seconds since the load started
    series: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in LIMITS})
    finished: list[float] = field(default_factory=list)  # runs finished so far, at each sample
    lag: dict[str, list[float]] = field(default_factory=dict)  # consumer lag by group, at each sample
    age: dict[str, list[float]] = field(default_factory=dict)  # committed offset age (s) by group

    def add_lag(self, by_group: dict[str, float], age_by_group: dict[str, float] | None = None) -> None:
        done = len(self.t) - 1  # this sample's index (`t` is appended first)
        for series, values in ((self.lag, by_group), (self.age, age_by_group or {})):
            for group in values.keys() | series.keys():
                series.setdefault(group, [0.0] * done).append(values.get(group, 0.0))


@dataclass(frozen=True)
class SoakResult:
    minutes: float
    conversations: int
    sent: int
    finished: int
    samples: Samples
    verdicts: list[Verdict]
    database: str = "sqlite"
    broker: str = "embedded Tansu"

    @property
    def failed(self) -> list[str]:
        why = [
            f"{v.series} grew {v.growth:,.1f} over the second half (allowed {v.allowed:,.1f})"
            for v in self.verdicts
            if v.failed
        ]
        if not self.finished:
            why.append("no run finished: the stack did not answer")
        return why


def metric_values(texts: list[str]) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Each wanted metric by label set; a label set several endpoints expose counts once."""
    seen: dict[str, dict[tuple[tuple[str, str], ...], float]] = {LAG: {}, BUFFERS: {}, STREAMS: {}, AGE: {}}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in seen:
                    seen[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return seen


def lag_by_group(values: dict[tuple[tuple[str, str], ...], float]) -> dict[str, float]:
    groups: dict[str, float] = {}
    for labels, value in values.items():
        group = dict(labels).get("group", "?")
        groups[group] = groups.get(group, 0.0) + value
    return groups


def age_by_group(values: dict[tuple[tuple[str, str], ...], float]) -> dict[str, float]:
    """The oldest uncommitted record's age per group: its worst partition."""
    groups: dict[str, float] = {}
    for labels, value in values.items():
        group = dict(labels).get("group", "?")
        groups[group] = max(groups.get(group, 0.0), value)
    return groups


def stack_config(
    model_url: str, telegram_url: str, database_url: str | None = None, kafka_bootstrap: str | None = None
) -> dict[str, Any]:
    """`database_url`: the five services' database (default: `agentstream up`'s one SQLite file).
    `kafka_bootstrap`: an Apache Kafka for `up --no-broker` (default: `up`'s embedded Tansu)."""
    kafka: dict[str, Any] = {"topic_prefix": f"soak-{uuid.uuid4().hex[:6]}.", "partitions": PARTITIONS}
    if kafka_bootstrap:
        kafka |= {"bootstrap_servers": kafka_bootstrap, "flavor": KAFKA}
    return ({"database": {"url": database_url}} if database_url else {}) | {
        "log_level": "WARNING",
        "kafka": kafka,
        "default_connector": "lean",
        "connectors": [{"id": "lean", "type": "openai", "base_url": model_url, "model": "soak"}],
        "platforms": {"telegram": {"api_url": telegram_url, "token_env": TOKEN_ENV}},
        "auth": {"metrics_token_env": METRICS_ENV},
        "authz": {"rate_limit": {"enabled": False}},
        # Ports of its own: a soak beside a running `agentstream up` (or another soak) must not meet it.
        "http": {name.replace("-", "_"): port for name, port in free_ports().items()},
    }


@contextlib.asynccontextmanager
async def stack_process(
    config: dict[str, Any], env: dict[str, str], ready_s: float = 120.0, start_broker: bool = True
) -> AsyncIterator[tuple[int, dict[str, Any]]]:
    """`agentstream up` in a fresh directory (`--no-broker` unless `start_broker`); yields (its pid,
    its state file: kafka, services, the embedded broker's pid)."""
    workdir = Path(tempfile.mkdtemp(prefix="agentstream-soak-"))
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    state = workdir / ".agentstream" / "stack.json"
    with (workdir / "stack.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentstream_stack", "up", "--config", "config.yaml", "--no-chat",
            *([] if start_broker else ["--no-broker"]),
            cwd=workdir, env=env, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + ready_s
        while not state.exists():
            if process.returncode is not None or time.monotonic() > deadline:
                tail = (workdir / "stack.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"agentstream up did not start (exit {process.returncode}):\n{tail}")
            await asyncio.sleep(0.2)
        yield process.pid, json.loads(state.read_text())
    finally:
        await terminate(process, 30)
        # Its database and broker state are the run's only (a failed start's log tail is in the error).
        shutil.rmtree(workdir, ignore_errors=True)


class Traffic:
    """`conversations` chats, each sending a message every `interval` s; counts finished runs."""

    def __init__(self, bootstrap: str, prefix: str, conversations: int, interval: float, tokens: int) -> None:
        self.bootstrap, self.prefix = bootstrap, prefix
        self.conversations, self.interval, self.tokens = conversations, interval, tokens
        self.sent = self.finished = 0
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)

    async def __aenter__(self) -> Traffic:
        await self._producer.start()
        await self._consumer.start()
        self._consumer.assign([TopicPartition(f"{self.prefix}events", p) for p in range(PARTITIONS)])
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()
        await self._producer.stop()

    async def count_finished(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=200)
            self.finished += sum(b'"run.finished"' in r.value for rs in batches.values() for r in rs if r.value)

    async def conversation(self, i: int, until: float) -> None:
        await asyncio.sleep(i * self.interval / self.conversations)  # spread: starts arrive evenly
        words = " ".join(["soak"] * (self.tokens - 1))
        while (now := time.monotonic()) < until:
            message = InboundMessage(
                id=f"soak-{uuid.uuid4().hex[:12]}", platform="telegram", chat_id=str(1000 + i),
                user=User(id=f"soak-user-{i}"), text=f"{i} {words}",
            )  # fmt: skip
            await self._producer.send(
                f"{self.prefix}inbound", message.model_dump_json().encode(), key=message.conversation_key.encode()
            )
            self.sent += 1
            await asyncio.sleep(max(0.0, now + self.interval - time.monotonic()))


async def sample_once(
    http: httpx.AsyncClient, urls: list[str], pids: tuple[int, int | None], token: str
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """(the sampled series, the consumer lag by group, the committed offset age by group); `pids`:
    the stack's and the broker's (None: not on this machine, its RSS left out)."""

    async def scrape(url: str) -> str:
        for attempt in range(3):  # a busy service may drop one request; three misses in a row end the soak
            try:
                answer = await http.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
                answer.raise_for_status()
                return answer.text
            except httpx.HTTPError:
                if attempt == 2:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    texts = await asyncio.gather(*(scrape(u) for u in urls))
    values = metric_values(texts)
    sums = {name: sum(by_labels.values()) for name, by_labels in values.items()}
    stack_pid, broker_pid = pids
    figures = {
        "stack RSS (MiB)": rss_bytes(stack_pid) / 2**20,
        BROKER_RSS: rss_bytes(broker_pid) / 2**20 if broker_pid is not None else None,
        "consumer lag (records)": sums[LAG],
        "persistence open buffers": sums[BUFFERS],
        "delivery open streams": sums[STREAMS],
    }
    return (
        {name: value for name, value in figures.items() if value is not None},
        lag_by_group(values[LAG]),
        age_by_group(values[AGE]),
    )


async def soak(
    minutes: float = 10.0, conversations: int = 100, interval: float = 6.0, tokens: int = 20,
    token_rate: float = 50.0, sample_s: float = 5.0, database_url: str | None = None,
    broker: SoakBroker = SoakBroker(EMBEDDED),
) -> SoakResult:  # fmt: skip
    """`broker`: the embedded Tansu `agentstream up` starts (default), or an Apache Kafka (`soak_broker`)."""
    metrics_token = uuid.uuid4().hex
    async with FakeTelegram(per_chat_interval=1.0) as tg, FakeModelProcess(token_delay_s=1 / token_rate) as model:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTREAM__")}
        env |= {TOKEN_ENV: tg.token, METRICS_ENV: metrics_token, "PYTHONPATH": str(REPO_ROOT)}
        config = stack_config(model.base_url, tg.url, database_url, broker.bootstrap)
        async with stack_process(config, env, start_broker=broker.embedded) as (pid, state):
            urls = [u.replace("://0.0.0.0:", "://127.0.0.1:") for u in state["services"].values()]
            broker_pid = state["broker_pid"] if broker.embedded else broker.pid
            async with Traffic(state["kafka"], state["topic_prefix"], conversations, interval, tokens) as traffic:
                start = time.monotonic()
                until = start + minutes * 60
                tasks = [asyncio.create_task(traffic.conversation(i, until)) for i in range(conversations)]
                tasks.append(asyncio.create_task(traffic.count_finished()))
                sampled = [name for name in LIMITS if name != BROKER_RSS or broker_pid is not None]
                samples = Samples(series={name: [] for name in sampled})
                try:
                    # No keep-alive: a pooled connection the server closes between samples fails the next one.
                    limits = httpx.Limits(max_keepalive_connections=0)
                    async with httpx.AsyncClient(timeout=10, limits=limits) as http:
                        while (now := time.monotonic()) < until + sample_s / 2:
                            figures, lag, age = await sample_once(http, urls, (pid, broker_pid), metrics_token)
                            samples.t.append(now - start)
                            samples.finished.append(traffic.finished)
                            samples.add_lag(lag, age)
                            for name, value in figures.items():
                                samples.series[name].append(value)
                            await asyncio.sleep(max(0.0, now + sample_s - time.monotonic()))
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
    verdicts = [grows(name, samples.t, ys, LIMITS[name]) for name, ys in samples.series.items()]
    database = (database_url or "sqlite").split("://", 1)[0].split("+", 1)[0]
    return SoakResult(
        minutes, conversations, traffic.sent, traffic.finished, samples, verdicts, database, broker.description
    )


def _verdict(v: Verdict) -> str:
    if not v.judged:
        return "grows (not judged: data held by design)" if v.grew else "ok (not judged)"
    return "FAIL" if v.failed else "ok"


def write_report(result: SoakResult, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    s = result.samples
    minutes = [t / 60 for t in s.t]
    plot(
        Curve(
            "soak.png",
            f"Soak: {result.conversations} conversations, {result.minutes:g} min, {result.broker}",
            "minutes",
            [(name, [Series(name, minutes, ys)]) for name, ys in s.series.items()]
            + [
                (
                    "consumer lag by group",
                    [Series(g.rsplit(".", 1)[-1], minutes, ys) for g, ys in sorted(s.lag.items())],
                )
            ]
            + [
                (
                    "committed offset age by group (s)",
                    [Series(g.rsplit(".", 1)[-1], minutes, ys) for g, ys in sorted(s.age.items())],
                )
            ]
            + [("runs finished", [Series("runs finished", minutes, [float(n) for n in s.finished])])],
        ),
        directory,
    )
    lines = [
        f"# Soak — {datetime.datetime.now():%Y-%m-%d %H:%M}",
        "",
        f"{result.conversations} conversations for {result.minutes:g} min on {result.broker} ({result.database}): "
        f"{result.sent} messages sent, "
        f"{result.finished} runs finished, {len(s.t)} samples. Consumer lag by group at the last sample: "
        + (", ".join(f"{g} {ys[-1]:,.0f}" for g, ys in sorted(s.lag.items())) or "none exported")
        + ". Committed offset age by group at the last sample (s), and its highest: "
        + (", ".join(f"{g} {ys[-1]:,.1f} (max {max(ys):,.1f})" for g, ys in sorted(s.age.items())) or "none exported")
        + "."
        + ("" if BROKER_RSS in s.series else " Broker RSS not sampled: its process is not one of this machine's."),
        "",
        "| series | first | last | mean, second half | slope per minute | growth over second half | allowed | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {v.series} | {v.first:,.1f} | {v.last:,.1f} | {v.mean_second_half:,.1f} | {v.slope_per_min:+,.2f} | "
        f"{v.growth:+,.1f} | {v.allowed:,.1f} | {_verdict(v)} |"
        for v in result.verdicts
    ]
    lines += [
        "",
        *(f"FAIL {why}" for why in result.failed),
        "" if result.failed else "PASS",
        "",
        "![soak](soak.png)",
        "",
    ]
    path = directory / "report.md"
    path.write_text("\n".join(lines))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the load runs (default 10)")
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--interval", type=float, default=6.0, help="seconds between one conversation's messages")
    parser.add_argument("--tokens", type=int, default=20, help="tokens per answer")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--out", type=Path, help="report directory (default bench/results/<date>-soak[-kafka])")
    parser.add_argument(
        "--pg", action="store_true", help=f"the services on a throw-away PostgreSQL database (${PG_ADMIN_ENV})"
    )
    parser.add_argument(
        "--broker",
        choices=[EMBEDDED, KAFKA],
        default=EMBEDDED,
        help="`agentstream up`'s embedded Tansu (default), or Apache Kafka: a 1-node cluster on the JVM "
        "started here (`up --no-broker` given its address)",
    )
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="with --broker kafka: an Apache Kafka already running")
    args = parser.parse_args(argv)
    if args.bootstrap and args.broker != KAFKA:
        parser.error("--bootstrap names an Apache Kafka: give --broker kafka with it")

    async def run() -> SoakResult:
        async with contextlib.AsyncExitStack() as started:
            broker = await started.enter_async_context(soak_broker(args.broker, args.bootstrap))
            database_url = None
            if args.pg:
                admin_url = os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)
                database_url = await started.enter_async_context(temporary_pg_database(admin_url))
            return await soak(
                args.minutes, args.conversations, args.interval, args.tokens,
                sample_s=args.sample, database_url=database_url, broker=broker,
            )  # fmt: skip

    result = asyncio.run(run())
    suffix = "-soak" + ("" if args.broker == EMBEDDED else f"-{args.broker}")  # as bench.all's reports
    path = write_report(result, args.out or RESULTS / f"{datetime.date.today():%Y-%m-%d}{suffix}")
    print(path.read_text())
    return 1 if result.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
