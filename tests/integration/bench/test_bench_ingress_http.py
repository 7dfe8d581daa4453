"""`bench.ingress_throughput --http`: both sides measured in one run, every request accepted, the figures printed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.ingress_http import HttpResult, HttpRound, format_http_table  # noqa: E402
from bench.ingress_throughput import main  # noqa: E402


def _round(auth: bool, seconds: float, cpu_s: float, statuses: dict[int, int] | None = None) -> HttpRound:
    return HttpRound(auth=auth, requests=100, seconds=seconds, statuses=statuses or {202: 100}, cpu_s=cpu_s)


def test_table_reports_both_rates_the_ratio_and_failures() -> None:
    result = HttpResult(
        requests=100,
        concurrency=8,
        credential="gateway",
        database="postgresql+psycopg",
        rounds=[_round(True, 1.0, 0.2), _round(False, 0.8, 0.18)],
    )
    assert result.rate(True) == 100.0 and result.rate(False) == 125.0 and result.ratio == 0.8
    assert result.cpu_us(True) == pytest.approx(2000.0) and result.failed == 0
    table = format_http_table(result)
    assert "100 req/s" in table and "125 req/s" in table and "80% (below the 90% target)" in table
    assert "FAILED" not in table
    broken = HttpResult(
        requests=100,
        concurrency=8,
        credential="gateway",
        database="postgresql+psycopg",
        rounds=[_round(True, 1.0, 0.2, {202: 90, 503: 10}), _round(False, 1.0, 0.2)],
    )
    assert (
        broken.failed == 10
        and broken.rate(True) == 90.0
        and "10 requests not answered 202" in format_http_table(broken)
    )


@pytest.mark.integration
@pytest.mark.parametrize("credential", ["gateway", "messages-write"])
def test_http_mode_runs_end_to_end_and_prints_json(db_url: str, credential: str, capsys) -> None:  # type: ignore[no-untyped-def]
    if not db_url.startswith("postgresql"):
        pytest.skip("the benchmark is specified on PostgreSQL")
    code = main(
        [
            "--http",
            "-n",
            "30",
            "--rounds",
            "1",
            "--concurrency",
            "4",
            "--credential",
            credential,
            "--database-url",
            db_url,
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["failed"] == 0
    assert {r["auth"] for r in out["rounds"]} == {True, False}
    assert all(r["statuses"] == {"202": 30} for r in out["rounds"])
    assert out["auth_rate"] > 0 and out["plain_rate"] > 0 and out["ratio"] == out["auth_rate"] / out["plain_rate"]
    assert out["auth_cpu_us"] > 0 and out["plain_cpu_us"] > 0  # both sides ran as their own process
    assert (out["credential"], out["concurrency"], out["requests"]) == (credential, 4, 30)
