"""The run-overhead benchmark, with tiny numbers: it measures real runs end to end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.run_overhead import run_bench  # noqa: E402
from bench.run_overhead_report import format_report, report_json  # noqa: E402


@pytest.mark.integration
async def test_run_overhead_smoke(kafka_bootstrap: str) -> None:
    report = await run_bench(
        kafka_bootstrap,
        levels=(1, 3),
        tokens=5,
        rate=200,
        long_tokens=40,
        min_runs=2,
        baseline_messages=20,
        timeout_s=60,
    )
    assert [(lvl.concurrency, lvl.runs) for lvl in report.levels] == [(1, 2), (3, 3)]
    for lvl in report.levels:
        assert 0 < lvl.first_p50_ms <= lvl.first_p99_ms < 10_000
        assert 0 < lvl.last_p50_ms <= lvl.last_p99_ms < 10_000
    # started, llm step, message started/completed, finished... plus coalesced deltas: far fewer than tokens.
    assert 0 < report.records_per_token < 1
    text = format_report(report)
    assert "raw Kafka round trip" in text and "records per generated token" in text
    assert report.levels[0].runners == 1 and report.levels[0].tokens_per_s > 0
    assert 0 < report.levels[0].machine_busy <= 1
    # Beside each level, the bare SDK and the runner's own reader read the same streams.
    for lvl in report.levels:
        assert lvl.sdk_cpu_us_per_token > 0 and lvl.reader_cpu_us_per_token > 0
        assert lvl.sdk_ratio == pytest.approx(lvl.runner_cpu_us_per_token / lvl.sdk_cpu_us_per_token)
    assert "bare SDK CPU" in text and all(isinstance(lv["sdk_ratio"], float) for lv in report_json(report)["levels"])


def test_a_saturated_level_is_marked_and_the_capacity_of_one_runner_is_given() -> None:
    from bench.run_overhead_report import LevelResult, OverheadReport

    calm = LevelResult(1, 20, 3.0, 5.0, 4.0, 6.0, runner_cpu_share=0.1, tokens_per_s=100.0)
    busy = LevelResult(200, 200, 70.0, 150.0, 50.0, 300.0, runner_cpu_share=1.9, runners=2, tokens_per_s=15_200.0)
    assert not calm.saturated and busy.saturated and busy.busy == pytest.approx(0.95)
    assert busy.tokens_per_core_s == pytest.approx(8_000.0)
    text = format_report(OverheadReport(1.5, 3.0, [calm, busy], 200, 100.0, 0.235, {"long_run_records": 47.0}, cores=2))
    lines = text.splitlines()
    assert "SATURATED" not in next(line for line in lines if line.strip().startswith("1 "))
    assert "SATURATED" in next(line for line in lines if line.strip().startswith("200 "))
    assert "8,000 tokens/s" in text
    levels = report_json(OverheadReport(1.5, 3.0, [calm, busy], 200, 100.0, 0.235, {}))["levels"]
    assert [(lv["saturated"], round(lv["tokens_per_core_s"])) for lv in levels] == [(False, 1000), (True, 8000)]
    assert LevelResult(1, 1, 1, 1, 1, 1, runner_cpu_us_per_token=90.0, sdk_cpu_us_per_token=60.0).sdk_ratio == 1.5
    assert calm.sdk_ratio == 0.0  # not measured: no ratio
    # The machine out of CPU is saturation too, whatever each runner's own share.
    assert LevelResult(50, 50, 9.0, 20.0, 9.0, 20.0, runner_cpu_share=0.5, machine_busy=0.9).saturated
