"""The doorbell across the processes of one machine, for a broker on loopback (the embedded Tansu).

A paused consumer (kafka/idle.py) wakes at once for a record its own process queues; one from
another process waited for the end watcher's next reading (kafka/end_watch.py: up to 10 ms while
a conversation is under way, 0.1 s otherwise) before its fetch. When the broker listens on
loopback, every process using it runs on this machine (the embedded stack with one `agentstream
serve` per service): each binds a datagram socket in a directory private to its user and the
broker's address, and a process that queues a record sends the topic's name to every other socket
there once the broker acknowledged the record (a consumer woken before the record is on the log would
wait out the fetch wait), whose process rings its own doorbell for that topic if one of its consumers reads it.

A shortcut, never the guarantee: a notice lost (a full receive buffer, a process starting or gone,
a directory that cannot be made) costs the record only the end watcher's delay, as without it. A
datagram from another program of the same user can only wake a consumer early (a fetch that finds
nothing). Per topic at most one notice per `NOTICE_GAP_S`: a consumer woken stays awake for
`IdlePacing.after_s` (longer), so the records right behind need none (docs/decisions.md § Idle
consumers on Tansu).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import math
import os
import secrets
import socket
import stat
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection
from pathlib import Path

import structlog

from agentstream.kafka.idle import DOORBELL, Doorbell

NOTICE_GAP_S = 0.02
MAX_NOTICE_BYTES = 512  # a topic name is at most 249 characters
SUFFIX = ".sock"
BIND_ATTEMPTS = 3

log = structlog.get_logger("agentstream.kafka")  # not observability's: it imports the HTTP side


def on_loopback(bootstrap_servers: str) -> bool:
    """Whether every broker address is this machine's own (`localhost` or a loopback IP)."""
    hosts = [address.strip().rsplit(":", 1)[0].strip("[]") for address in bootstrap_servers.split(",")]
    return bool(hosts) and all(_is_loopback(host) for host in hosts)


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def doorbell_dir(bootstrap_servers: str, root: Path | None = None) -> Path:
    """The directory of the sockets of every process of this user on the broker at `bootstrap_servers`."""
    addresses = ",".join(sorted(a.strip().lower() for a in bootstrap_servers.split(",")))
    digest = hashlib.sha256(addresses.encode()).hexdigest()[:16]
    return (root or Path(tempfile.gettempdir())) / f"agentstream-{os.getuid()}" / digest


def private_dir(path: Path) -> bool:
    """Make `path` and its parent, each a directory of this user only; False when either is not
    (another user's, a symbolic link, open to others): then nothing is sent or read there."""
    for directory in (path.parent, path):
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
            found = os.lstat(directory)
        except OSError:
            return False
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
            return False
    return True


def send_notices(sock: socket.socket, directory: Path, topic: str, own: Path | None = None) -> int:
    """Send `topic` to every socket in `directory` but `own`; how many were sent. A socket nobody
    reads (its process is gone: names are never reused) is removed; any other failure loses that
    notice only (a full buffer: the end watcher remains)."""
    notice = topic.encode()
    try:
        peers = [e.path for e in os.scandir(directory) if e.name.endswith(SUFFIX)]
    except OSError:
        return 0
    sent = 0
    for peer in peers:
        if own is not None and peer == str(own):
            continue
        try:
            sock.sendto(notice, peer)
            sent += 1
        except ConnectionRefusedError:
            with contextlib.suppress(OSError):
                os.unlink(peer)
        except OSError:
            pass
    return sent


def notify_near(bootstrap_servers: str, topic: str) -> int:
    """For a process that writes without consuming (`agentstream send`): tell the processes on the
    broker at `bootstrap_servers` that `topic` has a record the broker acknowledged; how many were
    told (0 when the broker is not on loopback or the directory is not private)."""
    directory = doorbell_dir(bootstrap_servers)
    if not on_loopback(bootstrap_servers) or not private_dir(directory):
        return 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        return send_notices(sock, directory, topic)


class NearDoorbell:
    """This process's socket in `directory`: notices out for the records the broker acknowledged
    (`notify`, hooked on its producers), notices in rung on `doorbell` for the `topics` its consumers read."""

    def __init__(
        self,
        directory: Path,
        doorbell: Doorbell = DOORBELL,
        gap_s: float = NOTICE_GAP_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = directory
        self.doorbell = doorbell
        self.gap_s = gap_s
        self.clock = clock
        self.path = directory / f"{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        self.topics: Counter[str] = Counter()  # topics this process's consumers read -> readers
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._noticed: dict[str, float] = {}  # topic -> when its last notice went out
        self.sent = 0  # datagrams sent
        self.rung = 0  # notices received for a topic read here

    @property
    def open(self) -> bool:
        return self._sock is not None

    def start(self) -> bool:
        """Bind the socket and read it on the running loop; False (and nothing bound) when the
        directory is not private or the socket cannot be bound."""
        if self._sock is not None:
            return True
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            for attempt in range(BIND_ATTEMPTS):
                if not private_dir(self.directory):
                    sock.close()
                    log.warning(
                        "near doorbell off: its directory is not private to this user", directory=str(self.directory)
                    )
                    return False
                try:
                    sock.bind(str(self.path))
                    break
                except FileNotFoundError:  # the last process of the broker removed the directory meanwhile
                    if attempt == BIND_ATTEMPTS - 1:
                        raise
            loop = asyncio.get_running_loop()
            loop.add_reader(sock.fileno(), self._read)
        except OSError as err:  # a path longer than a socket's (108 bytes), a full disk
            sock.close()
            with contextlib.suppress(OSError):
                self.path.unlink()
            log.warning("near doorbell off: socket not bound", error=type(err).__name__)
            return False
        self._sock, self._loop = sock, loop
        return True

    def stop(self) -> None:
        sock, self._sock, loop, self._loop = self._sock, None, self._loop, None
        if sock is None:
            return
        if loop is not None and not loop.is_closed():
            loop.remove_reader(sock.fileno())
        sock.close()
        with contextlib.suppress(OSError):
            self.path.unlink()
            self.directory.rmdir()  # the last process on this broker leaves no directory behind

    def notify(self, topic: str) -> None:
        """Tell every other process on the broker that `topic` has a record (at most once per `gap_s`)."""
        sock = self._sock
        if sock is None:
            return
        now = self.clock()
        if now - self._noticed.get(topic, -math.inf) < self.gap_s:
            return
        self._noticed[topic] = now
        self.sent += send_notices(sock, self.directory, topic, own=self.path)

    def _read(self) -> None:
        sock = self._sock
        while sock is not None:
            try:
                notice = sock.recv(MAX_NOTICE_BYTES)
            except OSError:  # BlockingIOError: all read
                return
            try:
                topic = notice.decode()
            except UnicodeDecodeError:
                continue
            if self.topics[topic]:
                self.rung += 1
                self.doorbell.ring(topic)


_NEAR: dict[str, NearDoorbell] = {}
_USERS: Counter[str] = Counter()


def join_near(bootstrap_servers: str, topics: Collection[str]) -> NearDoorbell | None:
    """This process's near doorbell for the broker at `bootstrap_servers` (one per process and
    broker, started on first use), its notices for `topics` rung here; None when the broker is
    not on loopback or the socket cannot be bound. `leave_near` undoes it."""
    if not on_loopback(bootstrap_servers):
        return None
    near = _NEAR.get(bootstrap_servers)
    if near is None:
        near = NearDoorbell(doorbell_dir(bootstrap_servers))
        if not near.start():
            return None
        _NEAR[bootstrap_servers] = near
    near.topics.update(topics)
    _USERS[bootstrap_servers] += 1
    return near


def leave_near(bootstrap_servers: str, topics: Collection[str]) -> None:
    near = _NEAR.get(bootstrap_servers)
    if near is None:
        return
    near.topics.subtract(topics)
    near.topics += Counter()  # drops the topics nobody reads any more
    _USERS[bootstrap_servers] -= 1
    if _USERS[bootstrap_servers] <= 0:
        del _USERS[bootstrap_servers], _NEAR[bootstrap_servers]
        near.stop()
