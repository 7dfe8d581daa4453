"""The message-path benchmark, with tiny numbers: real messages through ingress, the runner,
persistence and delivery, each hop of each run timed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentstream.config import KafkaFlavor
from agentstream_testing.brokers import flavor_under_test

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.message_path import HOPS, TOTAL, database, format_report, measure  # noqa: E402


@pytest.mark.integration
@pytest.mark.timeout(240)  # a broker, four service processes and a model process on a shared machine
async def test_message_path_smoke(kafka_bootstrap: str) -> None:
    embedded = flavor_under_test() is KafkaFlavor.TANSU
    async with database("sqlite") as db_url:
        report = await measure(
            kafka_bootstrap,
            embedded,
            db_url,
            broker="embedded" if embedded else "kafka",
            levels=(1, 2),
            min_runs=2,
            gap_s=0.3,
            baseline_messages=20,
        )
    assert [(lv.conversations, lv.runs) for lv in report.levels] == [(1, 2), (2, 2)]
    for level in report.levels:
        # every hop of every run was seen: the arrival travelled from ingress through the runner
        assert [(h.hop, h.samples) for h in level.hops] == [(name, level.runs) for name, _, _ in HOPS]
        hops = {h.hop: h for h in level.hops}
        assert 0 < hops[TOTAL].p50_ms < 60_000
        assert hops["runs produced → runner read"].p50_ms > -2  # the record's timestamp has ms resolution
    text = format_report(report)
    assert "produce → ingress read" in text and "raw round trip" in text and "conversation(s)" in text
