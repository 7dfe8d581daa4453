"""Every benchmark in one go: one report with every figure, its target and its ratio to the
baseline of the same run, and one plot per curve.

    uv run python -m bench.all            # everything, full sizes (make bench); tens of minutes
    uv run python -m bench.all --quick    # a ~2-minute subset
    uv run python -m bench.all --smoke    # tiny sizes, seconds: the suite runs this
    uv run python -m bench.all --broker kafka   # on Apache Kafka (make bench BENCH_BROKER=kafka)

One broker carries every Kafka benchmark: an embedded Tansu (`--broker tansu`, the default), or a
1-node Apache Kafka (`--broker kafka`, or AGENTSTREAM_BENCH_BROKER=kafka: in Docker where a Docker
engine answers, else on the JVM from its Maven artifacts, `agentstream_testing.kafka_jvm`). The raw
baseline (`bench.kafka_baseline`) is measured on it first and every broker figure is shown as a
ratio to it; the report names the broker. Writes
`bench/results/<date>[-quick|-smoke][-kafka]/report.md` and its PNGs (`--out DIR` elsewhere). A benchmark
that fails is listed under "Not measured" and the exit status is 1; the others still run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import sys
import tempfile
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import structlog

if __package__ in (None, ""):  # run as a file (`python bench/all.py`): make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentstream.config import KafkaFlavor  # noqa: E402
from agentstream.kafka import EmbeddedBroker  # noqa: E402
from bench.kafka_baseline import measure_baseline  # noqa: E402
from bench.report import Report, write  # noqa: E402
from bench.sections import (  # noqa: E402
    Context,
    capacity,
    cli,
    delivery,
    ingress,
    ingress_http,
    kafka_baseline,
    overhead,
    path,
    render,
    tools,
)
from bench.sections_apache_kafka import rebalances, transactions  # noqa: E402
from bench.sizes import SIZES  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BROKER_ENV = "AGENTSTREAM_BENCH_BROKER"


Bench = Callable[[Context, Report], Awaitable[None]]
BENCHES: dict[str, Bench] = {
    "kafka_baseline": kafka_baseline,
    "run_overhead": overhead,
    "delivery_efficiency": delivery,
    "ingress_throughput": ingress,
    "message_path": path,
    "ingress_http": ingress_http,
    "tool_roundtrip": tools,
    "formatting": render,
    "stream_capacity": capacity,
    "cli_startup": cli,
    "kafka_transactions": transactions,  # full mode only, as the next: Apache Kafka of their own on Tansu
    "rebalance_cost": rebalances,
}


def broker_name(broker: KafkaFlavor) -> str:
    """The broker as the report names it."""
    if broker is KafkaFlavor.TANSU:
        return "embedded Tansu broker"
    from agentstream_testing.kafka_jvm import KAFKA_VERSION

    return f"Apache Kafka {KAFKA_VERSION} broker (1 node, KRaft)"


@asynccontextmanager
async def started_broker(broker: KafkaFlavor) -> AsyncIterator[str]:
    """The broker's bootstrap servers for as long as the block runs."""
    if broker is KafkaFlavor.TANSU:
        async with EmbeddedBroker() as embedded:
            yield embedded.bootstrap_servers
        return
    # The test support starts Apache Kafka (a dev dependency, as the benchmarks are).
    from agentstream_testing.brokers import apache_kafka, broker_unavailable, kafka_on_jvm
    from agentstream_testing.kafka_jvm import fetch_jars, jars_ready

    if reason := broker_unavailable():
        raise RuntimeError(reason)
    if kafka_on_jvm() and not jars_ready():
        await asyncio.to_thread(fetch_jars, lambda line: print(line, file=sys.stderr, flush=True))
    with tempfile.TemporaryDirectory(prefix="agentstream-bench-kafka-") as workdir:
        # Started and stopped in a thread: the launcher waits on the JVM with blocking calls.
        cluster = apache_kafka(Path(workdir))
        bootstrap = await asyncio.to_thread(cluster.__enter__)
        try:
            yield bootstrap
        finally:
            await asyncio.to_thread(cluster.__exit__, None, None, None)


async def run_all(mode: str, only: list[str] | None = None, broker: KafkaFlavor = KafkaFlavor.TANSU) -> Report:
    sizes = SIZES[mode]
    report = Report(f"agentstream benchmarks — {mode}, {datetime.datetime.now():%Y-%m-%d %H:%M}")
    load = os.getloadavg()[0]
    report.lines.append(
        f"Machine: {os.cpu_count()} cores, load average {load:.1f} at the start; {broker_name(broker)}. "
        "Every ratio is to a baseline measured in this run."
    )
    embedded = broker is KafkaFlavor.TANSU
    async with started_broker(broker) as bootstrap:
        baseline = await measure_baseline(bootstrap, sizes.baseline_messages, embedded=embedded)
        ctx = Context(bootstrap, baseline, sizes, embedded)
        for name, bench in BENCHES.items():
            if only and name not in only:
                continue
            started = time.monotonic()
            print(f"[bench.all] {name} ...", file=sys.stderr, flush=True)
            try:
                await bench(ctx, report)
            except Exception as exc:  # one benchmark's failure is reported; the others still run
                traceback.print_exc()
                report.errors.append(f"{name}: {type(exc).__name__}: {exc}".splitlines()[0])
            print(f"[bench.all] {name} done in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.all", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a ~2-minute subset")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes (seconds): that every benchmark runs")
    parser.add_argument("--only", nargs="+", choices=list(BENCHES), help="these benchmarks only")
    parser.add_argument(
        "--broker",
        choices=[KafkaFlavor.TANSU.value, KafkaFlavor.KAFKA.value],
        default=os.environ.get(BROKER_ENV) or KafkaFlavor.TANSU.value,
        help=f"the broker every benchmark runs on (default ${BROKER_ENV}, else tansu: the embedded one)",
    )
    parser.add_argument("--out", type=Path, help="report directory (default bench/results/<date>[-mode][-kafka])")
    args = parser.parse_args(argv)
    name = "quick" if args.quick else "smoke" if args.smoke else "full"
    broker = KafkaFlavor(args.broker)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))  # warnings and up
    report = asyncio.run(run_all(name, args.only, broker))
    suffix = ("" if name == "full" else f"-{name}") + ("" if broker is KafkaFlavor.TANSU else f"-{broker.value}")
    out = args.out or RESULTS / f"{datetime.date.today():%Y-%m-%d}{suffix}"
    path = write(report, out)
    print(path.read_text())
    print(f"report: {path}", file=sys.stderr)
    return 1 if report.errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
