"""The ingress benchmark runs end to end on the real broker and PostgreSQL and reports sane figures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.ingress_throughput import IngressResult, format_table, inbound_id, measure_ingress  # noqa: E402
from bench.kafka_baseline import BaselineResult  # noqa: E402

from agentstream.contracts import ReplyTarget, StartRun, User  # noqa: E402

BASELINE = BaselineResult(
    bootstrap="x",
    embedded=True,
    messages=1,
    payload_bytes=1,
    p50_ms=1.0,
    p99_ms=1.0,
    msgs_per_s=1000.0,
    round_trips=1,
    burst_received=1,
)


def _result(**measured: float | None) -> IngressResult:
    """10 records at half the raw rate, on PostgreSQL, with `measured` CPU figures."""
    return IngressResult(
        messages=10,
        runs_received=10,
        seconds=0.02,
        msgs_per_s=500.0,
        baseline_msgs_per_s=1000.0,
        database="postgresql+psycopg",
        **measured,  # type: ignore[arg-type]
    )


def test_table_reports_ratio_and_target():
    result = _result()
    assert result.ratio == 0.5
    table = format_table(result)
    assert "50% of raw (ok)" in table and "1,000 msg/s" in table
    assert "ingress CPU" not in table  # unknown when ingress shared the driver's process
    measured = _result(ingress_cpu_s=0.001)
    assert measured.cpu_us_per_msg == 100.0 and "100 us per record" in format_table(measured)


def test_table_reports_the_other_processes_cpu_per_record():
    # database_cpu_s None: not measured, left out of the row
    result = _result(ingress_cpu_s=0.001, broker_cpu_s=0.0002, database_cpu_s=None, driver_cpu_s=0.0004)
    assert "other CPU    broker 20, driver 40 us per record" in format_table(result)
    in_process = IngressResult(10, 10, 0.02, 500.0, 1000.0, "postgresql+psycopg", driver_cpu_s=0.0015)
    assert "driver with ingress 150 us per record" in format_table(in_process)


def start_run(inbound: str | None) -> bytes:
    return (
        StartRun(
            id="r1",
            run_id="run-1",
            conversation_key="bench:chat-1",
            assistant_id="default",
            user=User(id="u"),
            text='say "hi" \\ there',
            inbound_id=inbound,
            reply_target=ReplyTarget(platform="bench", chat_id="chat-1"),
        )
        .model_dump_json()
        .encode()
    )


@pytest.mark.parametrize("inbound", ["bench-17", 'with "quotes"', "back\\slash", "\u00e9t\u00e9", None])
def test_inbound_id_of_a_start_run_is_what_json_decoding_gives(inbound: str | None) -> None:
    assert inbound_id(start_run(inbound)) == inbound


@pytest.mark.integration
async def test_measure_ingress_moves_every_record_to_runs(kafka_bootstrap: str, db_url: str) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("the benchmark is specified on PostgreSQL")
    result = await measure_ingress(kafka_bootstrap, db_url, 40, embedded=True, baseline=BASELINE, warmup=5)
    assert result.runs_received == 40 and result.msgs_per_s > 0
    assert result.baseline_msgs_per_s == 1000.0 and result.database.startswith("postgresql")
    assert result.ingress_cpu_s is not None  # ingress ran as its own `agentstream serve ingress` process
    assert result.driver_cpu_s is not None and result.driver_cpu_s > 0
    assert result.database_cpu_s is not None  # the local server's backends for the run's database


@pytest.mark.integration
async def test_measure_ingress_in_the_driver_process(kafka_bootstrap: str, db_url: str) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("the benchmark is specified on PostgreSQL")
    result = await measure_ingress(
        kafka_bootstrap, db_url, 20, embedded=True, baseline=BASELINE, warmup=5, in_process=True
    )
    assert result.runs_received == 20 and result.ingress_cpu_s is None
