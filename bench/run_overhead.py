"""Run overhead: what the agent-runner adds between the model and Kafka, beside the
raw broker round trip measured in the same run.

    uv run python -m bench.run_overhead                      # embedded Tansu, levels 1, 50, 200
    uv run python -m bench.run_overhead --levels 1 10 --json
    uv run python -m bench.run_overhead --runners 2          # two runner processes share the partitions

The model is `bench.lean_model` (an OpenAI-compatible server in its own process: real
HTTP on 127.0.0.1, real SSE), streaming each run's text at `--rate` tokens per second.
The agent-runner runs as `agentstream serve agent-runner` in its own process(es);
StartRun records are produced straight to `runs` and the `events` topic is read with a
plain consumer. For each run (times are all `time.monotonic()`, one system clock):

- first-token overhead: the server sent the first token → the first `message.delta`
  of the run is read from Kafka;
- last-token overhead: the server sent the last token → `run.finished` is read.

Reported as p50 / p99 per concurrency level, each beside the raw produce→consume round
trip of `bench/kafka_baseline.py` (same broker, same run) and beside the raw round trip
at the same broker load, and Kafka records written per generated token for one long
run at `--rate` tokens/s. A level whose runner processes were busy more than 85% of the
time is marked *saturated*: its latency is queueing for the runner's CPU, and the report
says how many tokens per second one runner process carried. Targets: p50 overhead ≤ 3×
the raw round trip; ≤ 0.25 records per token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentstream.config import Settings, load_settings
from agentstream.config.tools import DEFAULT_CALL_SECRET_ENV
from agentstream.contracts import ReplyTarget, RunEventAdapter, RunOptions, StartRun, User
from agentstream.db import upgrade
from agentstream.kafka import create_topics
from agentstream.kafka.flavor import tuning

if __package__ in (None, ""):  # run as a file (`python bench/x.py`): make `bench` importable
    import sys as _sys
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))
from bench.broker_cli import add_broker_arguments, run_cli  # noqa: E402
from bench.kafka_baseline import measure_baseline, measure_loaded_round_trip, percentile  # noqa: E402
from bench.run_overhead_report import LevelResult, OverheadReport, format_report, report_json  # noqa: E402
from bench.sdk_reader import sdk_cpu_per_token  # noqa: E402
from bench.service_process import ServiceProcess, base_config  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


def machine_cpu() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far (Linux `/proc/stat`)."""
    ticks = [int(t) for t in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total else 0.0


class Runners:
    """`count` agent-runner processes with one config (one consumer group: they split the partitions)."""

    def __init__(self, count: int, config: dict[str, Any]) -> None:
        self.count, self.config = count, config
        self.processes: list[ServiceProcess] = []
        self._stack = contextlib.AsyncExitStack()

    async def __aenter__(self) -> Runners:
        await self._stack.__aenter__()
        try:
            for _ in range(self.count):
                self.processes.append(
                    await self._stack.enter_async_context(ServiceProcess("agent-runner", self.config))
                )
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds() for p in self.processes)

    def rss_bytes(self) -> int:
        return sum(p.rss_bytes() for p in self.processes)


@dataclass
class RunTimes:
    launched_at: float | None = None
    first_delta_at: float | None = None
    finished_at: float | None = None
    records: int = 0
    types: Counter[str] = field(default_factory=Counter)
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class EventWatch:
    """Reads `events` (every partition, manual assignment) and times each run's milestones."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, fetch_wait_ms: int) -> None:
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=fetch_wait_ms,
            auto_offset_reset="earliest",
        )
        self._topic, self._partitions = topic, partitions
        self.runs: dict[str, RunTimes] = {}
        self.total_records = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        self._consumer.assign([TopicPartition(self._topic, p) for p in range(self._partitions)])
        self._task = asyncio.create_task(self._read())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
        await self._consumer.stop()

    async def _read(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=50)
            now = time.monotonic()
            for records in batches.values():
                for record in records:
                    event = RunEventAdapter.validate_json(record.value)
                    times = self.runs.setdefault(event.root_run_id, RunTimes())
                    times.records += 1
                    self.total_records += 1
                    times.types[event.type] += 1
                    if event.type == "message.delta" and times.first_delta_at is None:
                        times.first_delta_at = now
                    elif event.type == "run.finished":
                        times.finished_at = now
                        times.finished.set()

    async def wait_finished(self, run_ids: Sequence[str], timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            for run_id in run_ids:
                await self.runs.setdefault(run_id, RunTimes()).finished.wait()


def _start(run_id: str, text: str) -> StartRun:
    key = f"bench:{run_id}"
    return StartRun(
        run_id=run_id,
        conversation_key=key,
        assistant_id="default",
        user=User(id="bench"),
        text=text,
        reply_target=ReplyTarget(platform="bench", chat_id=run_id),
        options=RunOptions.model_validate({"skip": ["history"]}),
    )


def _text(run_id: str, tokens: int) -> str:
    # The fake server echoes the user text: the run id marks which request is whose.
    return " ".join([run_id, *(["token"] * (tokens - 1))])


class FakeModelProcess:
    """The model: `bench.lean_model` (OpenAI-compatible SSE, echo, paced) in its own process,
    as a real model server would be — its CPU is not the runner's. Its `time.monotonic()` is
    the same system clock as ours."""

    def __init__(self, token_delay_s: float) -> None:
        self._args = ["-m", "bench.lean_model", "--echo-token-delay", str(token_delay_s)]
        self._process: asyncio.subprocess.Process | None = None
        self.base_url = ""

    async def __aenter__(self) -> FakeModelProcess:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, *self._args, stdout=asyncio.subprocess.PIPE, cwd=REPO_ROOT
        )
        assert self._process.stdout is not None
        self.base_url = (await self._process.stdout.readline()).decode().strip()
        if not self.base_url.startswith("http"):
            raise RuntimeError(f"fake model server did not start (exit code {self._process.returncode})")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            await asyncio.wait_for(self._process.wait(), 10)

    async def timings(self) -> dict[str, dict[str, float | None]]:
        """Server-side times of every request so far, by run id (the first word of the echoed text)."""
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.get(self.base_url.removesuffix("/v1") + "/_fake/requests")
        answer.raise_for_status()
        return {str(r["user"]).split(" ", 1)[0]: r for r in answer.json()["requests"]}


class Bench:
    def __init__(
        self, settings: Settings, fake: FakeModelProcess, watch: EventWatch, producer: AIOKafkaProducer, runner: Runners
    ) -> None:
        self.settings, self.fake, self.watch, self.producer = settings, fake, watch, producer
        self.runner = runner
        self.runs_topic = f"{settings.kafka.topic_prefix}runs"

    async def launch(self, count: int, tokens: int, timeout_s: float) -> list[str]:
        run_ids = [f"r{uuid.uuid4().hex[:10]}" for _ in range(count)]
        for run_id in run_ids:
            start = _start(run_id, _text(run_id, tokens))
            self.watch.runs.setdefault(run_id, RunTimes()).launched_at = time.monotonic()
            await self.producer.send(self.runs_topic, start.to_json(), key=start.conversation_key.encode())
        await self.producer.flush()
        await self.watch.wait_finished(run_ids, timeout_s)
        return run_ids

    async def overheads(self, run_ids: Sequence[str]) -> tuple[list[float], list[float], list[float]]:
        first, last, start = [], [], []
        server = await self.fake.timings()
        for run_id in run_ids:
            times, request = self.watch.runs[run_id], server[run_id]
            first_token, last_token = request["first_token_at"], request["last_token_at"]
            if times.first_delta_at is None or first_token is None or last_token is None:
                raise RuntimeError(f"run {run_id} streamed nothing")
            assert times.finished_at is not None and times.launched_at is not None
            received_at = request["received_at"] or 0.0
            first.append((times.first_delta_at - first_token) * 1000)
            last.append((times.finished_at - last_token) * 1000)
            start.append((received_at - times.launched_at) * 1000)
        return first, last, start

    async def level(self, concurrency: int, tokens: int, rate: float, min_runs: int, timeout_s: float) -> LevelResult:
        """`concurrency` runs in flight, as in steady traffic: each of `concurrency` clients
        starts a run, waits for its `run.finished`, starts the next; their first starts are
        spread over one run's length, so starts arrive evenly rather than all at once."""
        rounds = -(-max(min_runs, concurrency) // concurrency)
        spacing = tokens / rate / concurrency

        async def client(index: int) -> list[str]:
            await asyncio.sleep(index * spacing)
            return [run_id for _ in range(rounds) for run_id in await self.launch(1, tokens, timeout_s)]

        cpu, wall, records, machine = (
            self.runner.cpu_seconds(),
            time.monotonic(),
            self.watch.total_records,
            machine_cpu(),
        )
        peak_rss = [self.runner.rss_bytes()]

        async def sample_rss() -> None:
            while True:
                await asyncio.sleep(0.25)
                peak_rss.append(self.runner.rss_bytes())

        sampler = asyncio.create_task(sample_rss())
        try:
            run_ids = [r for ids in await asyncio.gather(*(client(i) for i in range(concurrency))) for r in ids]
        finally:
            sampler.cancel()
        peak_rss.append(self.runner.rss_bytes())
        cpu, wall, machine_busy = (
            self.runner.cpu_seconds() - cpu,
            time.monotonic() - wall,
            busy_share(machine, machine_cpu()),
        )
        events_per_s = (self.watch.total_records - records) / wall
        first, last, start = await self.overheads(run_ids)
        tokens_per_s = len(run_ids) * tokens / wall
        # The yardstick of the CPU per token: the SDK alone reading as many streams at the same pace.
        sdk = await sdk_cpu_per_token(self.fake.base_url, concurrency, rounds, tokens, rate)
        reader = await sdk_cpu_per_token(self.fake.base_url, concurrency, rounds, tokens, rate, reader="connector")
        # The same broker, the same record rate, no agentstream: what Kafka alone costs at this load.
        loaded = await measure_loaded_round_trip(
            self.settings.kafka.bootstrap_servers,
            events_per_s,
            partitions=self.settings.kafka.partitions,
            embedded=self.settings.kafka.in_memory,
            seconds=2.0,
        )
        return LevelResult(
            concurrency,
            len(run_ids),
            percentile(first, 50),
            percentile(first, 99),
            percentile(last, 50),
            percentile(last, 99),
            cpu / (len(run_ids) * tokens) * 1e6,
            cpu / wall,
            events_per_s,
            loaded.p50_ms,
            percentile(start, 50),
            self.runner.count,
            tokens_per_s,
            machine_busy,
            max(peak_rss) / 2**20,
            sdk,
            reader,
        )


def runner_config(bootstrap: str, embedded: bool, db_url: str, model_url: str) -> dict[str, Any]:
    """The agent-runner's config file: the fake model as the only connector."""
    return base_config(bootstrap, embedded, db_url) | {
        "default_connector": "fake",
        "connectors": [{"id": "fake", "type": "openai", "base_url": model_url, "model": "bench"}],
    }


async def run_bench(
    bootstrap: str,
    *,
    embedded: bool = True,
    levels: Sequence[int] = (1, 50, 200),
    tokens: int = 100,
    rate: float = 100.0,
    long_tokens: int = 200,
    min_runs: int = 20,
    baseline_messages: int = 500,
    timeout_s: float = 120.0,
    database_url: str | None = None,
    runners: int = 1,
) -> OverheadReport:
    """`database_url`: the runner's database (default: a new SQLite file, as `agentstream up`);
    `runners`: agent-runner processes (one consumer group)."""
    baseline = await measure_baseline(bootstrap, baseline_messages, embedded=embedded)
    # The runner signs its tool calls and refuses to start without the secret (docs/tools.md);
    # its process inherits this one.
    os.environ.setdefault(DEFAULT_CALL_SECRET_ENV, secrets.token_hex(32))
    workdir = Path(tempfile.mkdtemp(prefix="agentstream-bench-"))
    db_url = database_url or f"sqlite+aiosqlite:///{workdir / 'bench.db'}"
    await upgrade(db_url)
    async with FakeModelProcess(token_delay_s=1 / rate) as fake:
        config = runner_config(bootstrap, embedded, db_url, fake.base_url)
        settings = load_settings(**config)
        await create_topics(settings.kafka)
        watch = EventWatch(
            bootstrap, settings.topic("events"), settings.kafka.partitions, tuning(settings.kafka).fetch_max_wait_ms
        )
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, enable_idempotence=tuning(settings.kafka).idempotent, linger_ms=0
        )
        await producer.start()
        await watch.start()
        try:
            async with Runners(runners, config) as runner:
                bench = Bench(settings, fake, watch, producer, runner)
                await bench.launch(1, 3, timeout_s)  # warm-up: group join, connections
                results = [await bench.level(c, tokens, rate, min_runs, timeout_s) for c in levels]
                [long_run] = await bench.launch(1, long_tokens, timeout_s)
        finally:
            await watch.stop()
            await producer.stop()
    long = watch.runs[long_run]
    return OverheadReport(
        baseline.p50_ms,
        baseline.p99_ms,
        results,
        long_tokens,
        rate,
        long.records / long_tokens,
        {
            "long_run_records": float(long.records),
            **{f"long_run.{kind}": float(n) for kind, n in sorted(long.types.items())},
        },
    )


async def _measure(args: argparse.Namespace, bootstrap: str, embedded: bool) -> OverheadReport:
    return await run_bench(
        bootstrap,
        embedded=embedded,
        levels=args.levels,
        tokens=args.tokens,
        rate=args.rate,
        min_runs=args.min_runs,
        baseline_messages=args.baseline_messages,
        database_url=args.database_url,
        runners=args.runners,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_overhead", description=__doc__.splitlines()[0])
    add_broker_arguments(parser)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 50, 200], help="concurrent runs")
    parser.add_argument("--tokens", type=int, default=100, help="tokens per run in the latency levels")
    parser.add_argument("--rate", type=float, default=100.0, help="tokens per second per stream")
    parser.add_argument("--min-runs", type=int, default=20, help="runs measured per level at least")
    parser.add_argument("--baseline-messages", type=int, default=500)
    parser.add_argument("--database-url", help="the runner's database (default: a new SQLite file)")
    parser.add_argument("--runners", type=int, default=1, help="agent-runner processes (one consumer group)")
    parser.add_argument("--json", action="store_true")
    return run_cli(parser.parse_args(argv), _measure, report_json, format_report)


if __name__ == "__main__":
    raise SystemExit(main())
