"""The soak, bounded to seconds: the embedded stack answers steady traffic, every series is sampled
as a number, and the report and plot are written; the slope rule, on made-up series."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.soak import LIMITS, Limit, Samples, grows, slope, soak, stack_config, write_report  # noqa: E402


@pytest.mark.integration
@pytest.mark.timeout(240)  # `agentstream up` (broker, five services) starts in a child process first
async def test_soak_smoke_samples_every_series_and_writes_the_report(tmp_path: Path) -> None:
    result = await soak(minutes=0.3, conversations=10, interval=2.0, tokens=5, sample_s=1.0)

    assert result.sent >= 10 and result.finished > 0
    samples = result.samples
    assert len(samples.t) >= 10 and samples.t == sorted(samples.t)
    assert set(samples.series) == set(LIMITS)
    for name, ys in samples.series.items():
        assert len(ys) == len(samples.t) and all(math.isfinite(y) and y >= 0 for y in ys), name
    assert min(samples.series["stack RSS (MiB)"]) > 20  # five services in one interpreter
    assert {v.series for v in result.verdicts} == set(LIMITS)
    assert samples.lag and all(len(ys) == len(samples.t) for ys in samples.lag.values())
    assert any(group.endswith(".persistence") for group in samples.lag)

    text = write_report(result, tmp_path).read_text()
    assert (tmp_path / "soak.png").read_bytes().startswith(b"\x89PNG")
    assert all(name in text for name in LIMITS)
    assert ("PASS" in text) != any(line.startswith("FAIL ") for line in text.splitlines())


def test_slope_is_the_least_squares_slope() -> None:
    assert slope([0, 1, 2, 3], [1, 3, 5, 7]) == pytest.approx(2.0)
    assert slope([5.0], [1.0]) == 0.0


def test_steady_growth_fails_and_noise_or_warm_up_passes() -> None:
    rng = random.Random(7)
    ts = [float(t) for t in range(0, 600, 5)]
    limit = Limit(0.05, 8.0)
    leaking = [200 + 0.2 * t + rng.uniform(-2, 2) for t in ts]  # +12 MiB a minute
    flat = [200 + rng.uniform(-3, 3) for _ in ts]
    warm_up = [150 + min(t, 250) * 0.2 + rng.uniform(-1, 1) for t in ts]  # climbs, then holds
    assert grows("rss", ts, leaking, limit).failed
    assert not grows("rss", ts, flat, limit).failed
    assert not grows("rss", ts, warm_up, limit).failed
    # Small series are judged against the floor, not against a mean near zero.
    assert not grows("buffers", ts, [float(rng.randint(0, 5)) for _ in ts], Limit(0.5, 20.0)).failed
    assert grows("buffers", ts, [t / 10 for t in ts], Limit(0.5, 20.0)).failed
    # A series shown but not judged grows without failing the soak.
    shown = grows("broker", ts, leaking, Limit(0.1, 16.0, judged=False))
    assert shown.grew and not shown.failed


def test_lag_by_group_keeps_one_value_per_sample_for_late_and_vanished_groups() -> None:
    samples = Samples()
    for t, lag in enumerate([{"a": 1.0}, {"a": 2.0, "b": 5.0}, {"b": 6.0}]):
        samples.t.append(float(t))
        samples.add_lag(lag)
    assert samples.lag == {"a": [1.0, 2.0, 0.0], "b": [0.0, 5.0, 6.0]}


def test_the_stack_keeps_its_sqlite_file_unless_given_a_database() -> None:
    assert "database" not in stack_config("http://model", "http://telegram")
    pg = "postgresql+psycopg://postgres@127.0.0.1:5432/as_bench_x"
    assert stack_config("http://model", "http://telegram", pg)["database"] == {"url": pg}
