"""`bench.all` in smoke sizes: the benchmarks that draw every curve run end to end, and the report
holds each of their figures as a number, beside its plots."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.all import BENCHES, broker_name, main, run_all  # noqa: E402
from bench.report import Figure, Report, write  # noqa: E402
from bench.sizes import SIZES  # noqa: E402

from agentstream_testing.brokers import broker_unavailable, flavor_under_test  # noqa: E402

# Every curve comes from these; ingress, tools and the CLI have their own smoke tests beside this one.
CURVES_FROM = ["kafka_baseline", "run_overhead", "delivery_efficiency", "formatting"]
PLOTS = {
    "overhead_vs_concurrency.png",
    "cpu_per_token_vs_concurrency.png",
    "rss_vs_streams.png",
    "delivery_vs_streams.png",
}


@pytest.mark.integration
@pytest.mark.timeout(180)  # a broker, a runner process and a model process on a shared machine
async def test_bench_all_smoke_writes_every_figure_and_plot(tmp_path: Path) -> None:
    report = await run_all("smoke", CURVES_FROM)

    assert report.errors == []
    assert {f.bench for f in report.figures} == set(CURVES_FROM)
    for figure in report.figures:
        assert isinstance(figure.value, float | int) and math.isfinite(figure.value), figure
        assert figure.ratio is None or (math.isfinite(figure.ratio) and figure.ratio > 0), figure
    raw = next(f for f in report.figures if f.name == "raw round trip p50")
    first = next(f for f in report.figures if f.name == "first token p50, 1 concurrent")
    assert first.ratio == pytest.approx(first.value / raw.value)

    _check_written(report, tmp_path)


@pytest.mark.integration
@pytest.mark.timeout(300)  # on Apache Kafka it starts a broker of its own
async def test_bench_all_runs_on_the_broker_under_test_and_names_it() -> None:
    broker = flavor_under_test()
    if reason := broker_unavailable():
        pytest.skip(reason)
    report = await run_all("smoke", ["kafka_baseline"], broker)

    assert report.errors == []
    assert broker_name(broker) in report.lines[0]
    assert [f.name for f in report.figures] == ["raw round trip p50", "raw round trip p99", "raw throughput"]
    assert all(math.isfinite(f.value) and f.value > 0 for f in report.figures)


def test_bench_all_refuses_an_unknown_broker(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--smoke", "--broker", "redpanda"])
    assert "invalid choice: 'redpanda'" in capsys.readouterr().err


def _check_written(report: Report, tmp_path: Path) -> None:
    path = write(report, tmp_path)
    assert {p.name for p in tmp_path.glob("*.png")} == PLOTS
    assert all((tmp_path / p).read_bytes().startswith(b"\x89PNG") for p in PLOTS)
    text = path.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| benchmark")]
    assert len(rows) == len(report.figures)
    assert all(f"]({p})" in text for p in PLOTS)


def test_the_report_lists_failures_and_saturation(tmp_path: Path) -> None:
    report = Report(
        "t",
        [
            Figure(
                "run_overhead",
                "first token p50, 200 concurrent",
                90.0,
                "ms",
                "≤ 3× raw",
                30.0,
                "raw",
                "SATURATED: one runner ≈ 8,000 tokens/s",
            )
        ],
    )
    report.errors.append("tool_roundtrip: TimeoutError")
    text = write(report, tmp_path).read_text()
    assert "| 90.0 ms | ≤ 3× raw | 30.00× | raw | SATURATED" in text
    assert "FAIL tool_roundtrip: TimeoutError" in text
    assert "SATURATED: the processes under test" in text


def test_make_bench_runs_every_benchmark() -> None:
    makefile = (Path(ROOT) / "Makefile").read_text()
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "bench.all" in recipe and "--only" not in recipe and "--quick" not in recipe
    assert set(BENCHES) >= {
        "kafka_baseline",
        "run_overhead",
        "delivery_efficiency",
        "ingress_throughput",
        "tool_roundtrip",
        "formatting",
        "kafka_transactions",
        "rebalance_cost",
    }


def test_the_apache_kafka_benchmarks_run_in_full_mode_only() -> None:
    # Minutes each, and a JVM broker of their own on an embedded-broker run: not in `make bench-quick`.
    assert SIZES["full"].transaction_records > 0 and SIZES["full"].rebalances
    for mode in ("quick", "smoke"):
        assert SIZES[mode].transaction_records == 0 and not SIZES[mode].rebalances, mode
