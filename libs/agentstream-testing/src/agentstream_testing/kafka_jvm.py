"""Apache Kafka on the JVM for the tests: the broker's Maven artifacts, no Docker image.

`apache_kafka/pom.xml` pins one Kafka version (docker-compose.yml's image and `KAFKA_IMAGE` name the
same one; tests/unit/lib/test_testing_brokers.py keeps them equal). `fetch_jars` copies the broker
and its dependencies with Maven into ``~/.cache/agentstream/kafka-<version>/libs`` once (`make
kafka`, or the first test session that wants Kafka). `KafkaJvmCluster` formats KRaft storage and
starts one node (broker and controller in one process) or three (each both: a 3-voter controller
quorum) on free loopback ports, waits until each node logs that it started, writes each node's log
to ``<workdir>/node-<id>/kafka.log`` and stops the nodes with SIGTERM, then SIGKILL.

``python -m agentstream_testing.kafka_jvm fetch`` fetches the jars; ``… run [--nodes 3]`` starts a
cluster until Ctrl-C (its bootstrap servers can be given to ``AGENTSTREAM_TEST_BOOTSTRAP``).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from agentstream.kafka.embedded import _die_with_parent, free_port

KAFKA_DIR = Path(__file__).with_name("apache_kafka")
POM = KAFKA_DIR / "pom.xml"
LOG4J_CONFIG = KAFKA_DIR / "log4j2.properties"
BROKER_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
STARTED_LINE = "Kafka Server started"  # KafkaRaftServer's, once the broker is unfenced and serving
PORT_TAKEN = "Address already in use"
HOST = "127.0.0.1"
COMPLETE_MARKER = ".complete"  # written last: a folder without it is an interrupted fetch
FETCH_TIMEOUT_S = 900.0
START_TIMEOUT_S = 120.0
FORMAT_TIMEOUT_S = 60.0
STOP_GRACE_S = 15.0
START_ATTEMPTS = 3  # a free port taken by another process before the JVM bound it: new ports, again
# 2 cores are shared by every test process: a small heap, the serial collector, the quick compiler
# only (a test broker lives minutes; C2's compilations would cost more CPU than they save).
JVM_OPTIONS = (
    "-Xms64m",
    "-Xmx384m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
    # Log4j's own shutdown hook runs beside Kafka's and can stop the log before the shutdown's lines
    # ("Unable to register Log4j shutdown hook because JVM is shutting down. Using SimpleLogger"):
    # without it, a node's log keeps its controlled shutdown to the last line.
    "-Dlog4j2.shutdownHookEnabled=false",
)
# The broker settings of every test cluster, whatever its size.
TEST_BROKER_SETTINGS: Mapping[str, str] = {
    # As docker-compose.yml: a topic exists only once created, with its configured partition count.
    "auto.create.topics.enable": "false",
    # A group's first member is assigned at once, not after 3 s waiting for others to join.
    "group.initial.rebalance.delay.ms": "0",
    # The internal topics are created on first use (a group, a transaction): 50 partitions each by
    # default, seconds of partition creation; a few are plenty for the tests.
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.num.partitions": "1",
    # Fewer threads than the defaults (sized for a server, not one of several test processes).
    "num.network.threads": "2",
    "num.io.threads": "2",
    "background.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "log.cleaner.threads": "1",
}


def pinned_version(pom: Path = POM) -> str:
    """The Kafka version the pom pins (its ``kafka.version`` property)."""
    namespace = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = ET.parse(pom).getroot().findtext("m:properties/m:kafka.version", namespaces=namespace)
    if not version:
        raise ValueError(f"{pom} has no <kafka.version> property")
    return version.strip()


KAFKA_VERSION = pinned_version()


def cache_root() -> Path:
    """Where fetched jars are kept: ``$XDG_CACHE_HOME/agentstream``, else ``~/.cache/agentstream``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentstream"


def jars_dir(version: str = KAFKA_VERSION) -> Path:
    return cache_root() / f"kafka-{version}" / "libs"


def jars_ready(version: str = KAFKA_VERSION) -> bool:
    return (jars_dir(version) / COMPLETE_MARKER).is_file()


def jvm_missing() -> str | None:
    """Why Kafka cannot run on the JVM here (no Java; no jars and no Maven to fetch them), or None."""
    if shutil.which("java") is None:
        return "no `java` on PATH (install a Java 17+ runtime)"
    if not jars_ready() and shutil.which("mvn") is None:
        return f"Kafka {KAFKA_VERSION}'s jars are not in {jars_dir()} and there is no `mvn` on PATH to fetch them"
    return None


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fetch_jars(say: Callable[[str], None] = _to_stderr) -> Path:
    """The folder of the pinned Kafka's jars, fetched with Maven first if they are not there yet.

    Processes that ask at once (pytest-xdist workers) wait on one lock: one fetches, the others
    find the folder complete."""
    target = jars_dir()
    if jars_ready():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jars_ready():
            return target
        if shutil.which("mvn") is None:
            raise RuntimeError(f"no `mvn` on PATH to fetch Kafka {KAFKA_VERSION}'s jars into {target}")
        say(f"fetching Apache Kafka {KAFKA_VERSION}'s jars with Maven into {target} (once; `make kafka` does it too)")
        partial = target.with_name("libs.partial")
        shutil.rmtree(partial, ignore_errors=True)
        command = [
            "mvn",
            "-B",
            "-q",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={partial}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
        if done.returncode != 0 or not any(partial.glob("kafka_2.13-*.jar")):
            output = (done.stdout + done.stderr).strip().splitlines()[-20:]
            raise RuntimeError(
                f"mvn could not fetch Kafka {KAFKA_VERSION} (exit {done.returncode}):\n" + "\n".join(output)
            )
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        (target / COMPLETE_MARKER).write_text(KAFKA_VERSION + "\n")
        say(f"Apache Kafka {KAFKA_VERSION}: {len(list(target.glob('*.jar')))} jars in {target}")
    return target


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding (what `kafka-storage
    random-uuid` prints). Never one starting with "-": the storage tool would read it as an option
    (Kafka's own Uuid.randomUuid draws again for the same reason)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


@dataclass
class KafkaNode:
    """One process of the cluster: a broker and a controller, each on its own port."""

    node_id: int
    directory: Path
    broker_port: int = 0
    controller_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log_file(self) -> Path:
        return self.directory / "kafka.log"

    @property
    def config_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.broker_port}"

    @property
    def voter(self) -> str:
        return f"{self.node_id}@{HOST}:{self.controller_port}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def node_properties(node: KafkaNode, voters: str, cluster_size: int) -> dict[str, str]:
    """The server.properties of one node of a cluster of `cluster_size` nodes whose controller
    quorum is `voters` (``id@host:port,…``)."""
    # The internal topics are replicated to every node of a small cluster (3 at most), and a write
    # to them needs 2 in sync once there are 3 (a real cluster's settings, one node down allowed).
    replicas = min(cluster_size, 3)
    min_in_sync = min(replicas, 2)
    return {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{HOST}:{node.broker_port},CONTROLLER://{HOST}:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{node.bootstrap}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(node.data_dir),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min_in_sync),
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min_in_sync),
        **TEST_BROKER_SETTINGS,
    }


def java_command(jars: Path, main: str, *args: str, log_config: Path = LOG4J_CONFIG) -> list[str]:
    java = shutil.which("java") or "java"
    return [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log_config}", "-cp", f"{jars}/*", main, *args]


class KafkaStartError(RuntimeError):
    """A node exited or did not start in time; the message ends with its log's last lines."""

    def __init__(self, node: KafkaNode, what: str) -> None:
        super().__init__(f"Kafka node {node.node_id} {what} (log {node.log_file}):\n{node.log_tail()}")
        self.port_taken = PORT_TAKEN in node.log_tail(200)


class KafkaJvmCluster:
    """Apache Kafka in KRaft mode, 1 or 3 nodes on 127.0.0.1, each node a broker and a controller.

    Use as a context manager, or `start()` / `stop()`. Start it from a thread that outlives it (the
    nodes get PR_SET_PDEATHSIG: they die with the thread that started them, and so with the test
    process even on SIGKILL). `workdir` keeps each node's config, log and data; the data is removed
    on stop, the logs stay.
    """

    def __init__(self, nodes: int = 1, workdir: Path | None = None, start_timeout_s: float = START_TIMEOUT_S) -> None:
        if nodes not in (1, 3):
            raise ValueError(f"a test cluster has 1 node or 3 (a 3-voter quorum), not {nodes}")
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="agentstream-kafka-"))
        self.start_timeout_s = start_timeout_s
        self.cluster_id = new_cluster_id()
        self.nodes = [KafkaNode(node_id, self.workdir / f"node-{node_id}") for node_id in range(1, nodes + 1)]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self) -> None:
        jars = fetch_jars()
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start_once(jars)
                return
            except KafkaStartError as err:
                self.stop()
                if not err.port_taken or attempt == START_ATTEMPTS:
                    raise

    def _start_once(self, jars: Path) -> None:
        self.cluster_id = new_cluster_id()
        for node in self.nodes:
            node.broker_port, node.controller_port = free_port(HOST), free_port(HOST)
        voters = ",".join(node.voter for node in self.nodes)
        for node in self.nodes:
            shutil.rmtree(node.directory, ignore_errors=True)
            node.directory.mkdir(parents=True)
            properties = node_properties(node, voters, len(self.nodes))
            node.config_file.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        self._format_storage(jars)
        for node in self.nodes:
            spawn_node(node, jars)
        deadline = time.monotonic() + self.start_timeout_s
        for node in self.nodes:
            wait_started(node, deadline)

    def _format_storage(self, jars: Path) -> None:
        """Each node's log folder formatted for this cluster id (the nodes at once: a JVM each)."""
        formatting = []
        for node in self.nodes:
            args = ("format", "--cluster-id", self.cluster_id, "--config", str(node.config_file))
            with open(node.log_file, "ab") as log:
                formatting.append(
                    (node, subprocess.Popen(java_command(jars, STORAGE_TOOL_MAIN, *args), stdout=log, stderr=log))
                )
        try:
            for node, process in formatting:
                if process.wait(timeout=FORMAT_TIMEOUT_S) != 0:
                    raise KafkaStartError(node, f"storage format failed (exit {process.returncode})")
        except subprocess.TimeoutExpired:
            raise KafkaStartError(node, f"storage format did not end in {FORMAT_TIMEOUT_S:.0f}s") from None
        finally:
            for _, process in formatting:
                if process.poll() is None:
                    process.kill()
                    process.wait()

    def stop_node(self, node_id: int, sig: signal.Signals = signal.SIGTERM) -> None:
        """Stop one node (SIGTERM: a controlled shutdown; SIGKILL: a crash), the others kept."""
        stop_processes([node for node in self.nodes if node.node_id == node_id], sig)

    def start_node(self, node_id: int) -> None:
        """A stopped node started again on its ports and its data (a broker restart), waited for
        until it logs that it started; KafkaStartError if it does not."""
        (node,) = [node for node in self.nodes if node.node_id == node_id]
        if node.process is not None and node.process.poll() is None:
            raise RuntimeError(f"Kafka node {node_id} is running")
        since = node.log_file.stat().st_size if node.log_file.exists() else 0
        spawn_node(node, fetch_jars())
        wait_started(node, time.monotonic() + self.start_timeout_s, since=since)

    def stop(self) -> None:
        """SIGTERM to every node, SIGKILL to any still running after the grace; the data removed."""
        stop_processes(self.nodes, signal.SIGTERM)
        for node in self.nodes:
            shutil.rmtree(node.data_dir, ignore_errors=True)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> KafkaJvmCluster:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def spawn_node(node: KafkaNode, jars: Path) -> None:
    """The node's JVM, its output appended to its log; it dies with the thread that spawned it."""
    with open(node.log_file, "ab") as log:
        node.process = subprocess.Popen(
            java_command(jars, BROKER_MAIN, str(node.config_file)),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )


def wait_started(node: KafkaNode, deadline: float, since: int = 0) -> None:
    """Until `node`'s log says it started after byte `since` (a restarted node's log holds the
    first start's line); KafkaStartError if it exits or the deadline passes."""
    seen = since
    while True:
        process = node.process
        if process is None or process.poll() is not None:
            code = None if process is None else process.returncode
            raise KafkaStartError(node, f"exited with code {code} while starting")
        with open(node.log_file, "rb") as log:
            log.seek(max(since, seen - len(STARTED_LINE)))  # the line may have been half written last time
            chunk = log.read()
            seen = log.tell()
        if STARTED_LINE.encode() in chunk:
            return
        if time.monotonic() > deadline:
            raise KafkaStartError(node, "did not start in time")
        time.sleep(0.2)


def stop_processes(nodes: list[KafkaNode], sig: signal.Signals, grace_s: float = STOP_GRACE_S) -> None:
    running = [node.process for node in nodes if node.process is not None and node.process.poll() is None]
    for process in running:
        process.send_signal(sig)
    deadline = time.monotonic() + grace_s
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for node in nodes:
        node.process = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentstream_testing.kafka_jvm", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="fetch the pinned Kafka's jars into the cache (idempotent)")
    run = commands.add_parser("run", help="start a test cluster until Ctrl-C")
    run.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    args = parser.parse_args(argv)
    if args.command == "fetch":
        print(fetch_jars())
        return 0
    # SIGTERM as Ctrl-C (and Ctrl-C even when started in the background, where SIGINT comes ignored):
    # either leaves the block, which stops the nodes.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    # The whole block: a signal that comes right after the line is printed (before the pause) stops
    # the nodes the same way, and exits 0, not as an uncaught KeyboardInterrupt (-2).
    with contextlib.suppress(KeyboardInterrupt), KafkaJvmCluster(nodes=args.nodes) as cluster:
        print(
            f"Apache Kafka {KAFKA_VERSION} on {cluster.bootstrap_servers} (logs in {cluster.workdir}); Ctrl-C stops it",
            flush=True,
        )
        signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main())
