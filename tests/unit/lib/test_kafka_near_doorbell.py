"""The doorbell across processes on one machine: notices out per topic, rung in only for topics read here."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentstream.kafka import near_doorbell
from agentstream.kafka.idle import Doorbell
from agentstream.kafka.near_doorbell import NearDoorbell, doorbell_dir, notify_near, on_loopback, private_dir

BOOTSTRAP = "127.0.0.1:19092"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def root() -> Iterator[Path]:
    """A short path: a socket's whole path must fit in 108 bytes (pytest's `tmp_path` may not)."""
    made = Path(tempfile.mkdtemp(prefix="nd-", dir="/tmp"))
    yield made
    shutil.rmtree(made, ignore_errors=True)


@pytest.fixture
def directory(root: Path) -> Path:
    return doorbell_dir(BOOTSTRAP, root=root)


@pytest.fixture
async def pair(directory: Path) -> AsyncIterator[tuple[NearDoorbell, NearDoorbell]]:
    """Two processes' doorbells (in one test process: each with its own `Doorbell`)."""
    near = [NearDoorbell(directory, Doorbell(), clock=Clock()) for _ in range(2)]
    for one in near:
        assert one.start()
    yield near[0], near[1]
    for one in near:
        one.stop()


def test_only_a_broker_on_this_machine_gets_notices() -> None:
    assert on_loopback("127.0.0.1:9092")
    assert on_loopback("localhost:1, [::1]:2,127.0.0.2:3")
    assert not on_loopback("10.0.0.1:9092")
    assert not on_loopback("127.0.0.1:1,kafka:9092")  # one broker elsewhere: another machine may write
    assert not on_loopback("")


def test_the_directory_is_per_user_and_broker_whatever_the_order_of_its_addresses(tmp_path: Path) -> None:
    assert doorbell_dir("a:1,b:2", tmp_path) == doorbell_dir(" B:2,a:1", tmp_path)
    assert doorbell_dir("a:1", tmp_path) != doorbell_dir("a:2", tmp_path)
    assert doorbell_dir("a:1", tmp_path).parent.name == f"agentstream-{os.getuid()}"


async def test_a_notice_rings_the_other_process_for_a_topic_it_reads(pair: tuple[NearDoorbell, NearDoorbell]) -> None:
    writer, reader = pair
    reader.topics.update(["runs"])
    waiting = asyncio.create_task(reader.doorbell.wait(["runs"], 2.0))
    await asyncio.sleep(0)
    writer.notify("runs")
    assert await waiting
    assert writer.sent == 1 and reader.rung == 1
    assert writer.doorbell.rings(["runs"]) == 0  # its own process rings itself at append, not by notice


async def test_a_notice_for_a_topic_nobody_here_reads_rings_nothing(pair: tuple[NearDoorbell, NearDoorbell]) -> None:
    writer, reader = pair
    reader.topics.update(["runs"])
    writer.notify("events")
    assert not await reader.doorbell.wait(["events"], 0.2)
    assert reader.rung == 0 and reader.doorbell.rings(["events"]) == 0


async def test_a_topic_is_noticed_at_most_once_per_gap(pair: tuple[NearDoorbell, NearDoorbell]) -> None:
    writer, reader = pair
    clock = writer.clock
    assert isinstance(clock, Clock)
    writer.notify("runs")
    clock.now += writer.gap_s / 2
    writer.notify("runs")  # the reader woken by the first stays awake longer than the gap
    writer.notify("inbound")  # another topic has its own gap
    assert writer.sent == 2
    clock.now += writer.gap_s
    writer.notify("runs")
    assert writer.sent == 3


async def test_garbage_and_unknown_topics_are_read_past(pair: tuple[NearDoorbell, NearDoorbell]) -> None:
    _, reader = pair
    reader.topics.update(["runs"])
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"\xff\xfe", str(reader.path))
        sock.sendto(b"x" * 400, str(reader.path))
        sock.sendto(b"runs", str(reader.path))
    assert await reader.doorbell.wait(["runs"], 2.0)
    assert reader.rung == 1 and reader.doorbell.rings(["x" * 400]) == 0


async def test_the_socket_of_a_process_gone_is_removed(
    pair: tuple[NearDoorbell, NearDoorbell], directory: Path
) -> None:
    writer, _ = pair
    gone = directory / "1-deadbeef.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(gone))  # closed at the end of the block: the file stays, nobody reads it
    assert gone.exists()
    writer.notify("runs")
    assert not gone.exists() and writer.sent == 1  # the live reader still got its notice


async def test_stop_removes_its_socket(directory: Path) -> None:
    near = NearDoorbell(directory, Doorbell())
    assert near.start() and near.path.exists()
    near.stop()
    assert not near.path.exists() and not near.open
    near.notify("runs")  # after stop: nothing sent, no error
    assert near.sent == 0


def test_a_directory_others_can_enter_is_not_used(directory: Path) -> None:
    assert private_dir(directory)
    directory.chmod(0o755)
    assert not private_dir(directory)
    near = NearDoorbell(directory, Doorbell())
    assert not near.start() and not near.open


# A child interpreter that imports the package: on a loaded machine its start alone took over the
# unit tests' 10 s (a fresh-clone `make test` at load 4). Only a notice that never comes waits this long.
CHILD_WAIT_S = 90.0


@pytest.mark.timeout(CHILD_WAIT_S + 30)
async def test_another_process_notice_wakes_a_reader_here(root: Path) -> None:
    """`agentstream send`'s way: a process with no socket of its own notifies the broker's directory."""
    reader = NearDoorbell(doorbell_dir(BOOTSTRAP, root=root), Doorbell())
    assert reader.start()
    reader.topics.update(["inbound"])
    try:
        waiting = asyncio.create_task(reader.doorbell.wait(["inbound"], CHILD_WAIT_S))
        code = f"from agentstream.kafka.near_doorbell import notify_near; print(notify_near({BOOTSTRAP!r}, 'inbound'))"
        env = {**os.environ, "TMPDIR": str(root)}
        child = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert child.stdout.strip() == "1"
        assert await waiting
    finally:
        reader.stop()


def test_a_broker_elsewhere_is_not_notified() -> None:
    assert notify_near("10.1.2.3:9092", "inbound") == 0


async def test_a_directory_removed_before_the_bind_is_made_again(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process, the broker's last, removed the directory between its check and the bind."""
    checks: list[bool] = []
    real = near_doorbell.private_dir

    def removed_at_first(path: Path) -> bool:
        checks.append(True)
        return len(checks) == 1 or real(path)  # the first check saw it, then it was gone

    monkeypatch.setattr(near_doorbell, "private_dir", removed_at_first)
    near = NearDoorbell(directory, Doorbell())
    try:
        assert near.start() and near.path.exists() and len(checks) == 2
    finally:
        near.stop()
