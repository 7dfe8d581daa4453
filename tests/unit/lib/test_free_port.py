"""`free_port`: a port nothing listens on, never one the kernel may give an outgoing connection meanwhile."""

from __future__ import annotations

import os
import random
import socket
import time
from pathlib import Path

import pytest

from agentstream.kafka import embedded
from agentstream.kafka.embedded import LISTEN_PORTS_FROM, ephemeral_ports, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_bound() -> None:
    for _ in range(20):
        port = free_port()
        assert LISTEN_PORTS_FROM <= port < ephemeral_ports().start
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(embedded, "LISTEN_PORTS_FROM", busy)
        monkeypatch.setattr(embedded, "ephemeral_ports", lambda: range(busy + 1002, 65536))
        # The busy port is the first one tried, every time.
        monkeypatch.setattr(embedded.random, "sample", lambda ports, k: [busy, *ports[1:k]])
        ports = {free_port() for _ in range(5)}
    assert busy not in ports and all(busy < p < busy + 1002 for p in ports)


def test_the_ephemeral_range_is_the_kernels_or_ianas(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    setting = tmp_path / "ip_local_port_range"
    setting.write_text("32768\t60999\n")
    monkeypatch.setattr(embedded, "EPHEMERAL_PORTS", setting)
    assert ephemeral_ports() == range(32768, 61000)
    monkeypatch.setattr(embedded, "EPHEMERAL_PORTS", tmp_path / "absent")
    assert ephemeral_ports() == range(49152, 65536)


def test_without_room_below_the_ephemeral_range_the_kernel_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "ephemeral_ports", lambda: range(LISTEN_PORTS_FROM + 10, 65536))
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_ports_handed_out_are_not_handed_out_again_before_their_servers_bind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A stack takes five ports, then binds them: the same random pick five times must still give five ports
    # (CI once saw delivery's port given to another of the stack's services, "address already in use").
    monkeypatch.setattr(embedded, "PORT_CLAIMS", tmp_path)
    monkeypatch.setattr(embedded.random, "sample", lambda ports, k: list(ports[:k]))
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    monkeypatch.setattr(embedded, "_HANDED_ORDER", embedded.collections.deque())
    ports = [free_port() for _ in range(5)]
    assert len(set(ports)) == 5, ports


def test_a_port_another_process_was_given_is_not_given_here(monkeypatch: pytest.MonkeyPatch) -> None:
    # Test workers are processes: each one's own record does not see the ports the others were given and have
    # not bound yet. The same random pick in two processes must still give two ports. The other process is a
    # fork (a fresh interpreter importing the package took over 10 s on a loaded machine).
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    monkeypatch.setattr(embedded, "_HANDED_ORDER", embedded.collections.deque())
    read, write = os.pipe()
    if (pid := os.fork()) == 0:  # the child: the same pick, then gone without running the parent's cleanups
        random.seed(7)
        os.write(write, str(free_port()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        theirs = int(answer.read())
    os.waitpid(pid, 0)
    random.seed(7)
    assert free_port() != theirs


def test_a_claim_older_than_a_server_takes_to_bind_is_void(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedded, "PORT_CLAIMS", tmp_path)
    monkeypatch.setattr(embedded.random, "sample", lambda ports, k: list(ports[:k]))
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    claimed = free_port()
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    assert free_port() != claimed  # a fresh claim is passed over
    old = time.time() - embedded.PORT_CLAIM_SECONDS - 1
    os.utime(tmp_path / str(claimed), (old, old))
    monkeypatch.setattr(embedded, "_HANDED_OUT", set())
    assert free_port() == claimed
