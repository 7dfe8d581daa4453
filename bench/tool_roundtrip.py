"""Tool round trip: a `tool-calls` request produced → its `tool-results` record consumed.

    uv run python -m bench.tool_roundtrip                      # embedded Tansu
    uv run python -m bench.tool_roundtrip --calls 1000 --json

The tool-executor runs as deployed (`agentstream serve tool-executor`, its own process, a
SQLite file for its `tool_calls` claims) and serves one no-op tool twice: as a Python
function tool (`bench__noop`) and through an MCP stdio server written with FastMCP
(`mcp__noop`, bench/noop_tools.py). The driver produces `ToolCallRequest`s and reads
`tool-results` with plain aiokafka, `parallel` calls in flight (1 and 50: each of that many
workers sends a call and waits for its result before the next). Beside it, measured in the
same run on the same broker: the raw round trip (a record produced → consumed, plain
aiokafka) with `parallel` records in flight the same way, over a topic of `kafka.partitions`
partitions read whole as the call's two topics are (and, for reference, over one partition).
Targets: the function tool's p50 ≤ 3× the raw p50 at the same parallelism (a call is two broker
hops, request and result, so 2× is the floor), and the executor's CPU per call ≤ 0.2 ms at 50 or
more in flight (at fewer, its idle fetch loop is spread over few calls). The MCP share is what the executor spent inside the MCP call
(its `duration_ms`, p50), shown beside the difference of the MCP and function round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agentstream.config import Settings, load_settings  # noqa: E402
from agentstream.config.tools import DEFAULT_CALL_SECRET_ENV  # noqa: E402
from agentstream.contracts import ToolCallRequest, ToolCallResult  # noqa: E402
from agentstream.contracts.tools import ToolCallResultAdapter  # noqa: E402
from agentstream.db import create_engine, upgrade  # noqa: E402
from agentstream.kafka import create_topics  # noqa: E402
from agentstream.kafka.flavor import tuning  # noqa: E402
from agentstream.tool_call_signing import call_secret, sign  # noqa: E402
from agentstream_tools.call_store import ToolCallStore  # noqa: E402
from bench.broker_cli import add_broker_arguments, run_cli  # noqa: E402
from bench.ingress_throughput import PG_ADMIN_DEFAULT, PG_ADMIN_ENV, temporary_pg_database  # noqa: E402
from bench.kafka_baseline import _fresh_topic, measure_baseline, percentile  # noqa: E402
from bench.service_process import ServiceProcess, base_config  # noqa: E402
from bench.tool_roundtrip_report import (  # noqa: E402
    CPU_TARGET_MS,
    FUNCTION_TOOL,
    MCP_TOOL,
    TARGET_RATIO,
    TOOLS,
    Level,
    Report,
    format_report,
    report_json,
)

__all__ = [
    "CPU_TARGET_MS",
    "FUNCTION_TOOL",
    "MCP_TOOL",
    "TARGET_RATIO",
    "Level",
    "Report",
    "format_report",
    "report_json",
    "run_bench",
]


class ResultReader:
    """Reads `tool-results` (every partition, from the end) and resolves each call's future."""

    def __init__(self, settings: Settings) -> None:
        self.topic = settings.topic("tool-results")
        self.settings = settings
        self.waiting: dict[str, asyncio.Future[ToolCallResult]] = {}
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=tuning(settings.kafka).fetch_max_wait_ms,
        )
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.assign([TopicPartition(self.topic, p) for p in range(self.settings.kafka.partitions)])
        await self.consumer.seek_to_end()
        for p in range(self.settings.kafka.partitions):  # resolve the end offsets before the first call
            await self.consumer.position(TopicPartition(self.topic, p))
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=100)
            for records in batches.values():
                for record in records:
                    result = ToolCallResultAdapter.validate_json(record.value)
                    future = self.waiting.pop(result.run_id, None)
                    if future is not None and not future.done():
                        future.set_result(result)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
        await self.consumer.stop()


class Driver:
    def __init__(self, settings: Settings, producer: AIOKafkaProducer, reader: ResultReader) -> None:
        self.settings, self.producer, self.reader = settings, producer, reader
        self.secret = call_secret(settings.tools) or b""
        self.topic = settings.topic("tool-calls")

    async def call(self, tool: str, worker: int, timeout_s: float) -> tuple[float, ToolCallResult]:
        """One call, timed from the produce until its result is read."""
        run_id = uuid.uuid4().hex
        key = f"bench:{worker}"
        request = ToolCallRequest(
            run_id=run_id, root_run_id=run_id, conversation_key=key, call_id="c1", tool=tool, arguments="{}"
        )
        value = sign(request.model_copy(update={"offered": [tool]}), self.secret).to_json()  # as a runner sends it
        future: asyncio.Future[ToolCallResult] = asyncio.get_running_loop().create_future()
        self.reader.waiting[run_id] = future
        started = time.perf_counter()
        await self.producer.send(self.topic, value, key=key.encode())
        async with asyncio.timeout(timeout_s):
            result = await future
        return (time.perf_counter() - started) * 1000, result

    async def level(self, tool: str, parallel: int, calls: int, timeout_s: float) -> tuple[list[float], list[float]]:
        """`calls` calls, `parallel` in flight; (round trips, executor durations) in ms."""
        trips: list[float] = []
        inside: list[float] = []
        left = calls

        async def worker(w: int) -> None:
            nonlocal left
            while left > 0:
                left -= 1
                ms, result = await self.call(tool, w, timeout_s)
                if not result.ok:
                    raise RuntimeError(f"{tool} failed: {result.error}")
                trips.append(ms)
                inside.append(result.duration_ms)

        await asyncio.gather(*(worker(w) for w in range(parallel)))
        return trips, inside

    async def until_served(self, tool: str, timeout_s: float) -> None:
        """Calls `tool` until it answers ok (an MCP server connects after the executor is ready)."""
        deadline = time.monotonic() + timeout_s
        while True:
            _, result = await self.call(tool, 0, timeout_s)
            if result.ok:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{tool} not served: {result.error}")
            await asyncio.sleep(0.2)


async def raw_parallel(
    bootstrap: str, embedded: bool, parallel: int, calls: int, partitions: int = 1
) -> tuple[float, float]:
    """The raw round trip with `parallel` records in flight: each of `parallel` workers produces
    a record and waits until the consumer has it back (plain aiokafka). The records go round the
    topic's `partitions`, and the consumer reads them all, as a call's two hops do."""
    async with _fresh_topic(bootstrap, embedded=embedded, kind="parallel", partitions=partitions) as (
        producer,
        consumer,
        topic,
    ):
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        waiting: dict[int, asyncio.Future[None]] = {}

        async def read() -> None:
            while True:
                for records in (await consumer.getmany(timeout_ms=100)).values():
                    for record in records:
                        future = waiting.pop(int(record.value), None)
                        if future is not None:
                            future.set_result(None)

        samples: list[float] = []
        counter = iter(range(-parallel * 2, calls))  # the first 2 per worker warm up, not counted

        async def worker() -> None:
            for seq in counter:
                future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                waiting[seq] = future
                started = time.perf_counter()
                await producer.send(topic, str(seq).encode(), partition=seq % partitions)
                async with asyncio.timeout(30):
                    await future
                if seq >= 0:
                    samples.append((time.perf_counter() - started) * 1000)

        reader = asyncio.create_task(read())
        try:
            await asyncio.gather(*(worker() for _ in range(parallel)))
        finally:
            reader.cancel()
            await asyncio.wait({reader})
    return percentile(samples, 50), percentile(samples, 99)


async def measure_store(db_url: str, calls: int) -> tuple[float, float]:
    """What the executor's at-most-once store costs per call on `db_url`: `claim` then `finish`
    (two transactions), one call at a time, in this process → (p50 ms, CPU ms per call)."""
    engine = create_engine(db_url)
    store = ToolCallStore(engine)
    samples: list[float] = []
    cpu = time.process_time()
    try:
        for i in range(-5, calls):  # 5 warm-up calls (connections, statement caches)
            run_id = uuid.uuid4().hex
            ids: dict[str, Any] = {
                "run_id": run_id,
                "root_run_id": run_id,
                "conversation_key": "bench:store",
                "call_id": "c1",
            }
            request = ToolCallRequest(**ids, tool=FUNCTION_TOOL, arguments="{}")
            started = time.perf_counter()
            await store.claim(request)
            result = ToolCallResult(**ids, tool=FUNCTION_TOOL, ok=True, content="ok")
            await store.finish(request, result, at_once=True)  # not left for a next claim: there is none
            if i == -1:
                cpu = time.process_time()
            elif i >= 0:
                samples.append((time.perf_counter() - started) * 1000)
    finally:
        await store.close()
        await engine.dispose()
    return percentile(samples, 50), (time.process_time() - cpu) * 1000 / calls


def executor_config(bootstrap: str, embedded: bool, db_url: str, parallel: int) -> dict[str, Any]:
    """The tool-executor's config file: the no-op as a function tool and behind an MCP server."""
    return base_config(bootstrap, embedded, db_url) | {
        "tools": {
            "max_concurrency": max(16, parallel),
            "functions": {"bench": ["bench.noop_tools:noop"]},
            "mcp_servers": {
                "mcp": {
                    "command": sys.executable,
                    "args": ["-m", "bench.noop_tools"],
                    "cwd": str(ROOT),
                    "max_concurrency": parallel,
                }
            },
        },
    }


async def run_bench(
    bootstrap: str,
    *,
    embedded: bool = True,
    parallels: Sequence[int] = (1, 50),
    calls: int = 500,
    baseline_messages: int = 500,
    warmup: int = 20,
    timeout_s: float = 30.0,
    database_url: str | None = None,
    tools: Sequence[str] = (FUNCTION_TOOL, MCP_TOOL),
    profile: Path | None = None,
) -> Report:
    """`database_url`: the executor's `tool_calls` store (default: a new SQLite file, as `agentstream up`);
    `profile`: run the executor under cProfile and write its stats there when it stops."""
    workdir = Path(tempfile.mkdtemp(prefix="agentstream-bench-tools-"))
    # The driver signs its calls as a runner does; the executor process inherits the secret.
    os.environ.setdefault(DEFAULT_CALL_SECRET_ENV, secrets.token_hex(32))
    db_url = database_url or f"sqlite+aiosqlite:///{workdir / 'tools.db'}"
    config = executor_config(bootstrap, embedded, db_url, max(parallels))
    settings = load_settings(**config)
    # The raw figure the target is judged against has the topology of a call's hops: a topic of
    # `kafka.partitions` partitions, read whole. One partition is shown beside it: the embedded
    # broker answers a parked fetch of a lone partition early, a fetch of several only at its wait.
    baseline = await measure_baseline(bootstrap, baseline_messages, embedded=embedded)
    partitions = settings.kafka.partitions
    raw = {
        parallel: await raw_parallel(bootstrap, embedded, parallel, max(calls, parallel * 4), partitions)
        for parallel in parallels
    }
    await upgrade(db_url)
    await create_topics(settings.kafka)
    report = Report(
        raw,
        database=db_url.split("://", 1)[0],
        raw_one_partition=(baseline.p50_ms, baseline.p99_ms),
        partitions=partitions,
    )
    report.store_p50_ms, report.store_cpu_ms = await measure_store(db_url, min(calls, 200))
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, enable_idempotence=tuning(settings.kafka).idempotent, acks="all", linger_ms=0
    )
    reader = ResultReader(settings)
    await producer.start()
    await reader.start()
    try:
        serve = ["-m", "agentstream_stack", "serve", "tool-executor"]
        command = ["-m", "cProfile", "-o", str(profile), *serve] if profile is not None else serve
        async with ServiceProcess("tool-executor", config, command=command) as executor:
            driver = Driver(settings, producer, reader)
            for tool in tools:
                await driver.until_served(tool, timeout_s)
                await driver.level(tool, max(parallels), max(warmup, max(parallels)), timeout_s)  # warm-up
                for parallel in parallels:
                    cpu_before, wall_before = executor.cpu_seconds(), time.perf_counter()
                    trips, inside = await driver.level(tool, parallel, max(calls, parallel), timeout_s)
                    cpu_s = executor.cpu_seconds() - cpu_before
                    cpu_ms = cpu_s * 1000 / len(trips)
                    busy = cpu_s / (time.perf_counter() - wall_before)
                    report.levels.append(
                        Level(
                            tool,
                            parallel,
                            len(trips),
                            percentile(trips, 50),
                            percentile(trips, 99),
                            *raw[parallel],
                            percentile(inside, 50),
                            cpu_ms,
                            busy,
                        )
                    )
    finally:
        await reader.stop()
        await producer.stop()
    return report


async def _measure(args: argparse.Namespace, bootstrap: str, embedded: bool) -> Report:
    if args.pg:
        async with temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)) as url:
            return await _measure_on(args, bootstrap, embedded, url)
    return await _measure_on(args, bootstrap, embedded, args.database_url)


async def _measure_on(args: argparse.Namespace, bootstrap: str, embedded: bool, database_url: str | None) -> Report:
    return await run_bench(
        bootstrap,
        embedded=embedded,
        parallels=tuple(args.parallel),
        calls=args.calls,
        baseline_messages=args.baseline_messages,
        database_url=database_url,
        tools=[TOOLS[t] for t in args.tools],
        profile=args.profile,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tool_roundtrip", description=__doc__.splitlines()[0])
    add_broker_arguments(parser)
    parser.add_argument("--calls", type=int, default=500, help="calls per tool and level (default 500)")
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 50], help="calls in flight (default 1 50)")
    parser.add_argument("--baseline-messages", type=int, default=500, help="raw round trips (default 500)")
    parser.add_argument("--database-url", help="the executor's database (default: a new SQLite file)")
    parser.add_argument("--pg", action="store_true", help=f"a throw-away PostgreSQL database on ${PG_ADMIN_ENV}")
    parser.add_argument("--tools", nargs="+", choices=sorted(TOOLS), default=list(TOOLS), help="(default: both)")
    parser.add_argument("--profile", type=Path, help="run the executor under cProfile, its stats written here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return run_cli(parser.parse_args(argv), _measure, report_json, format_report)


if __name__ == "__main__":
    raise SystemExit(main())
