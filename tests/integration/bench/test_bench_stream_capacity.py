"""`bench.stream_capacity` at one small level: a delivery process in its own process, a fake Bot API at its limits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench import stream_capacity  # noqa: E402


@pytest.mark.integration
@pytest.mark.timeout(180)  # two child processes on a shared machine
async def test_one_level_per_markup_is_measured_at_the_fake() -> None:
    result = await stream_capacity.measure(levels=[2], seconds=1.0)
    for cap in (result.telegram_html, result.passthrough):
        (level,) = cap.levels
        assert level.streams == 2 and level.rate_limited == 0
        assert level.exact_finals_pct == 100.0  # every chat shows its answer, rendered for its markup
        assert 0 <= level.final_p50_ms < float("inf") and level.cpu_us_per_delta > 0
        assert cap.streams_per_core(20.0) > 0


def test_a_level_whose_finals_never_came_is_not_carried() -> None:
    """At 640 streams the delivery process once showed no final at all: every chat's last frame
    came before its stream ended, a latency of 0 ms, and the level read as carried."""
    shown_nothing = stream_capacity.Level(
        640, 0.0, 0.0, 0, exact_finals_pct=0.0, cpu_us_per_delta=2691.0, cpu_share=0.72
    )
    every_final = stream_capacity.Level(
        20, 113.0, 531.0, 0, exact_finals_pct=100.0, cpu_us_per_delta=225.0, cpu_share=0.07
    )
    assert not shown_nothing.carried and every_final.carried
