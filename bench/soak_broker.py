"""The broker a soak runs on: `agentstream up`'s embedded Tansu, or Apache Kafka.

On Apache Kafka the stack runs as `agentstream up --no-broker` with `kafka.bootstrap_servers` and
`kafka.flavor: kafka` in its config file; the Kafka is a 1-node cluster on the JVM the soak starts
(`agentstream_testing.kafka_jvm`, its jars from Maven, fetched at the first run), or one already
running (`--bootstrap`). The soak samples the broker's resident memory: the embedded one's pid is in
the stack's state file; a JVM it started is its own child; a broker already running is found by the
process listening on its port, when that is a JVM of this machine this user may read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

EMBEDDED, KAFKA = "embedded", "kafka"
LISTEN = "0A"  # a socket's state in /proc/net/tcp: TCP_LISTEN
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"}


@dataclass(frozen=True)
class SoakBroker:
    """`kind`: EMBEDDED (`agentstream up` starts it) or KAFKA (the stack is given `bootstrap`).
    `pid`: the broker's process on this machine, for its RSS (None: the embedded one's comes
    from the stack's state file; on Kafka, not known: its RSS is not sampled)."""

    kind: str
    bootstrap: str | None = None
    pid: int | None = None
    description: str = "embedded Tansu"

    @property
    def embedded(self) -> bool:
        return self.kind == EMBEDDED


def listening_inodes(proc_net_tcp: str, port: int) -> set[int]:
    """The socket inodes listening on `port` in a `/proc/net/tcp` (or `tcp6`) table, on any address."""
    inodes = set()
    for line in proc_net_tcp.splitlines()[1:]:  # the first line names the columns
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        if int(fields[1].rsplit(":", 1)[1], 16) == port:
            inodes.add(int(fields[9]))
    return inodes


def listening_pid(bootstrap: str, proc: Path = Path("/proc")) -> int | None:
    """The process of this machine listening on the first address of `bootstrap`, if its host is
    this machine and the process is one this user may read (not a container's proxy, say)."""
    host, _, port = bootstrap.split(",", 1)[0].rpartition(":")
    if host.strip("[]") not in LOCAL_HOSTS or not port.isdigit():
        return None
    inodes: set[int] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            inodes |= listening_inodes((proc / "net" / table).read_text(), int(port))
    sockets = {f"socket:[{inode}]" for inode in inodes}
    for entry in proc.iterdir() if sockets else ():
        if entry.name.isdigit() and _holds_any(entry / "fd", sockets):
            return int(entry.name)
    return None


def _holds_any(fds: Path, sockets: set[str]) -> bool:
    try:
        entries = list(fds.iterdir())
    except OSError:  # another user's process, or one that just ended
        return False
    for fd in entries:
        with contextlib.suppress(OSError):  # a descriptor closed since it was listed
            if os.readlink(fd) in sockets:
                return True
    return False


def kafka_description(bootstrap: str, started_here: bool) -> str:
    from agentstream_testing.kafka_jvm import KAFKA_VERSION

    if started_here:
        return f"Apache Kafka {KAFKA_VERSION} (1 node, KRaft, on the JVM)"
    return f"Apache Kafka at {bootstrap}"


def running_kafka(bootstrap: str, proc: Path = Path("/proc")) -> SoakBroker:
    """An Apache Kafka already running at `bootstrap`: its process found by its port, if a JVM of
    this machine listens there (a container's port is a proxy's, whose RSS is not the broker's)."""
    pid = listening_pid(bootstrap, proc)
    if pid is not None and command_name(pid, proc) != "java":
        pid = None
    return SoakBroker(KAFKA, bootstrap, pid, kafka_description(bootstrap, False))


def command_name(pid: int, proc: Path = Path("/proc")) -> str | None:
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except OSError:
        return None


@contextlib.asynccontextmanager
async def soak_broker(kind: str = EMBEDDED, bootstrap: str | None = None) -> AsyncIterator[SoakBroker]:
    """The broker for as long as the block runs: the embedded one is `agentstream up`'s own (nothing
    to start here); Kafka is `bootstrap`, else a 1-node Apache Kafka on the JVM started here."""
    if kind == EMBEDDED:
        if bootstrap:
            raise ValueError("--bootstrap names an Apache Kafka: give --broker kafka with it")
        yield SoakBroker(EMBEDDED)
        return
    if bootstrap:
        yield running_kafka(bootstrap)
        return
    # Test support (a dev dependency, as the benchmarks are); its jars fetched at the first run.
    from agentstream_testing.kafka_jvm import KafkaJvmCluster

    cluster = KafkaJvmCluster(nodes=1)
    await asyncio.to_thread(cluster.start)  # blocking: the launcher waits on the JVM
    try:
        process = cluster.nodes[0].process
        pid = process.pid if process is not None else None
        yield SoakBroker(KAFKA, cluster.bootstrap_servers, pid, kafka_description(cluster.bootstrap_servers, True))
    finally:
        await asyncio.to_thread(cluster.stop)
