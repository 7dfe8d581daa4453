"""The soak, bounded to seconds: the embedded stack answers steady traffic (on the broker the suite
runs on: `agentstream up`'s own Tansu, or with AGENTSTREAM_TEST_BROKER=kafka `up --no-broker` on the
session's Apache Kafka), every series is sampled as a number, and the report and plot are written;
the slope rule, on made-up series; the broker's process found by its port."""

from __future__ import annotations

import math
import os
import random
import socket
import sys
from pathlib import Path

import pytest

from agentstream.config import KafkaFlavor
from agentstream_testing.brokers import TEST_BOOTSTRAP_ENV, flavor_under_test, kafka_on_jvm

ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.soak import (  # noqa: E402
    BROKER_RSS,
    LIMITS,
    PARTITIONS,
    Limit,
    Samples,
    SoakResult,
    grows,
    main,
    slope,
    soak,
    stack_config,
    write_report,
)
from bench.soak_broker import EMBEDDED, KAFKA, SoakBroker, listening_inodes, listening_pid, running_kafka  # noqa: E402


@pytest.fixture
def broker_under_test(request: pytest.FixtureRequest) -> SoakBroker:
    """`agentstream up`'s embedded Tansu, or the session's Apache Kafka (the fixture asked for only
    then: on Tansu the soak starts its own broker, and the session's would sit idle)."""
    if flavor_under_test() is KafkaFlavor.TANSU:
        return SoakBroker(EMBEDDED)
    return running_kafka(request.getfixturevalue("kafka_bootstrap"))


@pytest.mark.integration
@pytest.mark.timeout(240)  # `agentstream up` (broker, five services) starts in a child process first
async def test_soak_smoke_samples_every_series_and_writes_the_report(
    tmp_path: Path, broker_under_test: SoakBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Path] = []

    def mkdtemp(prefix: str) -> str:
        made.append(tmp_path / f"{prefix}stack")
        made[-1].mkdir()
        return str(made[-1])

    monkeypatch.setattr("bench.soak.tempfile.mkdtemp", mkdtemp)
    result = await soak(minutes=0.3, conversations=10, interval=2.0, tokens=5, sample_s=1.0, broker=broker_under_test)
    assert made and not made[0].exists()  # the stack's directory is removed with the stack (it was left in /tmp)

    assert result.sent >= 10 and result.finished > 0
    samples = result.samples
    assert len(samples.t) >= 10 and samples.t == sorted(samples.t)
    # The broker's RSS is sampled wherever its process is this machine's: the embedded one's, or the
    # JVM the session started (found by its port); not a container's (its port is a proxy's).
    local_broker = broker_under_test.embedded or (kafka_on_jvm() and not os.environ.get(TEST_BOOTSTRAP_ENV))
    assert set(samples.series) == set(LIMITS) - (set() if local_broker else {BROKER_RSS})
    for name, ys in samples.series.items():
        assert len(ys) == len(samples.t) and all(math.isfinite(y) and y >= 0 for y in ys), name
    assert min(samples.series["stack RSS (MiB)"]) > 20  # five services in one interpreter
    if local_broker:  # Tansu's process, or a JVM's (its heap alone is tens of MiB)
        assert min(samples.series[BROKER_RSS]) > (50 if broker_under_test.kind == KAFKA else 1)
    assert {v.series for v in result.verdicts} == set(samples.series)
    assert samples.lag and all(len(ys) == len(samples.t) for ys in samples.lag.values())
    assert any(group.endswith(".persistence") for group in samples.lag)

    text = write_report(result, tmp_path).read_text()
    assert (tmp_path / "soak.png").read_bytes().startswith(b"\x89PNG")
    assert all(name in text for name in samples.series)
    assert f"on {broker_under_test.description} (sqlite)" in text
    assert ("Apache Kafka" in text) == (broker_under_test.kind == KAFKA)
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


def test_on_kafka_the_stack_is_given_its_address_and_flavor() -> None:
    assert "bootstrap_servers" not in stack_config("http://model", "http://telegram")["kafka"]
    kafka = stack_config("http://model", "http://telegram", kafka_bootstrap="127.0.0.1:9092")["kafka"]
    assert kafka["bootstrap_servers"] == "127.0.0.1:9092" and kafka["flavor"] == "kafka"
    assert kafka["topic_prefix"].startswith("soak-")
    assert kafka["partitions"] == PARTITIONS  # the soak reads every partition of `events`, however many


def test_bootstrap_without_broker_kafka_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--bootstrap", "127.0.0.1:9092"])
    assert exit_.value.code == 2 and "--broker kafka" in capsys.readouterr().err


# /proc/net/tcp's layout: a header, then one socket a line (address:port in hex, state 0A = LISTEN).
PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2384 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0
   1: 0100007F:2384 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0 20 4 30 10 -1
   2: 00000000:2385 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0 100 0 0 10 0
"""


def test_listening_inodes_are_the_listening_sockets_of_the_port_only() -> None:
    assert listening_inodes(PROC_NET_TCP, 0x2384) == {4242}  # not the connection to it (state 01)
    assert listening_inodes(PROC_NET_TCP, 0x2385) == {4444}  # any address
    assert listening_inodes(PROC_NET_TCP, 9) == set()


def test_the_process_listening_on_a_local_port_is_found_and_no_other() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert listening_pid(f"127.0.0.1:{port}") == os.getpid()
        assert listening_pid(f"localhost:{port},127.0.0.1:1") == os.getpid()  # the first address
    assert listening_pid(f"127.0.0.1:{port}") is None  # closed
    assert listening_pid(f"kafka.example:{port}") is None  # not this machine


def test_a_running_kafka_is_sampled_only_when_a_jvm_listens_on_its_port() -> None:
    with socket.socket() as listening:  # this test's Python, as a container's port proxy would be
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        broker = running_kafka(f"127.0.0.1:{listening.getsockname()[1]}")
    assert broker.kind == KAFKA and broker.pid is None and not broker.embedded
    assert broker.description.startswith("Apache Kafka at 127.0.0.1:")


def test_the_report_names_the_broker_and_says_when_its_rss_was_not_sampled(tmp_path: Path) -> None:
    samples = Samples(series={"stack RSS (MiB)": [100.0, 100.0]})
    for t, finished in ((0.0, 1.0), (5.0, 2.0)):
        samples.t.append(t)
        samples.finished.append(finished)
        samples.add_lag({"soak.persistence": 0.0}, {"soak.persistence": 0.1})
    verdicts = [grows("stack RSS (MiB)", samples.t, samples.series["stack RSS (MiB)"], LIMITS["stack RSS (MiB)"])]
    result = SoakResult(0.1, 1, 2, 2, samples, verdicts, broker="Apache Kafka at kafka.example:9092")
    text = write_report(result, tmp_path).read_text()
    assert "on Apache Kafka at kafka.example:9092 (sqlite)" in text
    assert "Broker RSS not sampled" in text and BROKER_RSS not in text.split("| series |")[1]
