"""The run-overhead benchmark, with tiny numbers: it measures real runs end to end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.run_overhead import format_report, run_bench  # noqa: E402


@pytest.mark.integration
async def test_run_overhead_smoke(kafka_bootstrap: str) -> None:
    report = await run_bench(kafka_bootstrap, levels=(1, 3), tokens=5, rate=200, long_tokens=40, min_runs=2,
                             baseline_messages=20, timeout_s=60)
    assert [(lvl.concurrency, lvl.runs) for lvl in report.levels] == [(1, 2), (3, 3)]
    for lvl in report.levels:
        assert 0 < lvl.first_p50_ms <= lvl.first_p99_ms < 10_000
        assert 0 < lvl.last_p50_ms <= lvl.last_p99_ms < 10_000
    # started, llm step, message started/completed, finished... plus coalesced deltas: far fewer than tokens.
    assert 0 < report.records_per_token < 1
    text = format_report(report)
    assert "raw Kafka round trip" in text and "records per generated token" in text
