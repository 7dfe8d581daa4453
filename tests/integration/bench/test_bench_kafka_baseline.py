"""The Kafka baseline measures a real broker and reports sane figures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/ is a directory of scripts at the repository root, not an installed package.
ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.kafka_baseline import (  # noqa: E402
    BaselineResult,
    format_table,
    measure_baseline,
    measure_loaded_round_trip,
    percentile,
)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([7.0], 99) == 7.0


@pytest.mark.integration
async def test_measure_baseline_round_trips_every_message(kafka_bootstrap: str) -> None:
    progress: list[tuple[str, int, int]] = []
    result = await measure_baseline(
        kafka_bootstrap, 50, embedded=True, warmup=5, progress=lambda *p: progress.append(p)
    )

    assert isinstance(result, BaselineResult)
    assert result.round_trips == 50
    assert result.burst_received == 50
    assert 0 < result.p50_ms <= result.p99_ms < 5_000
    assert result.msgs_per_s > 0
    assert progress[-2:] == [("latency", 50, 50), ("burst", 50, 50)]
    assert result.latency_ratio(result.p50_ms * 3) == 3.0
    table = format_table(result)
    assert "round trip p50" in table and "msg/s" in table


@pytest.mark.integration
async def test_loaded_round_trip_times_every_probe_under_background_load(kafka_bootstrap: str) -> None:
    result = await measure_loaded_round_trip(
        kafka_bootstrap, 500, partitions=3, seconds=0.5, probe_interval_s=0.02, embedded=True
    )
    assert result.probes == 25  # every probe came back through the loaded topic
    assert (result.records_per_s, result.partitions) == (500, 3)
    assert 0 < result.p50_ms <= result.p99_ms < 5_000
