"""Apache Kafka broker failover under traffic, nothing lost.

A 3-node KRaft cluster (3 voters), the five services as `agentstream serve` processes set as the prod
overlay sets them (every topic they create replicated 3 times with min.insync.replicas=2; Kafka's
idempotent producers with acks=all), and 20 conversations posted to ingress's front door the way a
client posts them (again with the same id after a 503):

- leader kill: `kill -9` of the broker that leads every partition of `inbound` and `events` while
  the first ten conversations stream; the other two take over and the rest are posted meanwhile;
- rolling restart: each broker in turn stopped (SIGTERM: a controlled shutdown) and started again
  under traffic, the next only once every partition has its three replicas in sync again (how an
  operator rolls a cluster, docs/deploy.md).

Every run ends, every answer is exact, no platform message is shown twice and none is lost. Each test
prints its row of the failover table (`failover | fault=… runs=… exact=… duplicates=… lost=…
recover_s=…`); recover_s is how long a message posted at the fault waited for its answer (the worst
of the three for the rolling restart). docs/deploy.md "Kafka settings for production" gives the table.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import httpx
import psycopg
import pytest

from agentstream.config import KafkaFlavor, Settings
from agentstream.kafka.topics import Topics
from agentstream_testing.brokers import flavor_under_test
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka_jvm import KafkaJvmCluster, jvm_missing
from tests.chaos.broker_stack import Stack
from tests.chaos.failover_rig import (
    ClusterOps,
    FailoverRow,
    Traffic,
    create_led_by,
    min_insync,
    partitions,
    tally,
    wait_in_sync,
)

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(
        flavor_under_test() is not KafkaFlavor.KAFKA,
        reason="Apache Kafka only (AGENTSTREAM_TEST_BROKER=kafka): failover is replication's, and the embedded "
        "Tansu is one node with nothing to fail over to",
    ),
    pytest.mark.skipif(jvm_missing() is not None, reason=f"the 3-node Kafka cluster runs on the JVM: {jvm_missing()}"),
]

REPLICAS, MIN_IN_SYNC = 3, 2
CONVERSATIONS = 20
# Each answer streams token by token (a tool call, then the reply): a run lasts about 2 s, so the
# conversations accepted just before a fault are mid-stream when it lands.
TOKEN_DELAY_MS = 200
ANSWER_TIMEOUT_S = 120.0
VICTIM = 2


@pytest.fixture(scope="module")
def cluster_ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterOps]:
    """One 3-node cluster for the module's tests (each has its own topic prefix); a test that stops a
    node starts it again, and each test begins by starting any node still down."""
    ops = ClusterOps(KafkaJvmCluster(nodes=3, workdir=tmp_path_factory.mktemp("kafka3")))
    try:
        ops.run(ops.cluster.start)
        yield ops
    finally:
        ops.close()


@pytest.fixture
def stack_db(pg_admin_url: str | None) -> Iterator[str]:
    """A fresh PostgreSQL database for the stack, as deployed: five services starting at once on one
    SQLite file wait on its lock, past SQLite's timeout on a loaded machine."""
    if pg_admin_url is None:
        (pytest.fail if os.environ.get("CI") else pytest.skip)("PostgreSQL is not reachable (AGENTSTREAM_TEST_PG)")
    name = f"as_failover_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = pg_admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    yield f"{base}/{name}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def all_nodes_up(ops: ClusterOps) -> None:
    for node in ops.cluster.nodes:
        if node.process is None or node.process.poll() is not None:
            await ops.call(partial(ops.cluster.start_node, node.node_id))


def failover_settings(bootstrap: str, prefix: str, db_url: str) -> Settings:
    kafka = {"flavor": KafkaFlavor.KAFKA.value, "replication_factor": REPLICAS, "min_insync_replicas": MIN_IN_SYNC}
    return make_test_settings(bootstrap, prefix, db_url, kafka=kafka)


def failover_stack(settings: Settings, tmp_path: Path) -> Stack:
    connectors = [{"id": "demo", "type": "scripted", "token_delay_ms": TOKEN_DELAY_MS}]
    return Stack(
        settings,
        tmp_path,
        connectors=connectors,
        default_connector="demo",
        kafka__replication_factor=REPLICAS,
        kafka__min_insync_replicas=MIN_IN_SYNC,
    )


async def check_replication(bootstrap: str, names: list[str]) -> dict[str, list[dict[str, object]]]:
    """Every topic of the stack has 3 replicas in sync and min.insync.replicas=2, whoever created it."""
    described = await partitions(bootstrap, names)
    assert sorted(described) == sorted(names), described
    assert all(len(p["replicas"]) == REPLICAS for parts in described.values() for p in parts), described
    assert set((await min_insync(bootstrap, names)).values()) == {str(MIN_IN_SYNC)}
    return described


def report(row: FailoverRow) -> None:
    print("\n" + row.line())
    assert row.in_flight > 0, "the fault came after every answer: nothing was streaming"
    assert (row.runs, row.exact, row.duplicates, row.lost) == (CONVERSATIONS, CONVERSATIONS, 0, 0), row
    assert (row.unfinished_runs, row.inbound_missing) == (0, 0), row


async def test_leader_of_inbound_and_events_killed_mid_stream(
    cluster_ops: ClusterOps, stack_db: str, tmp_path: Path
) -> None:
    cluster = cluster_ops.cluster
    await all_nodes_up(cluster_ops)
    bootstrap, prefix = cluster.bootstrap_servers, f"fo{uuid.uuid4().hex[:6]}."
    settings = failover_settings(bootstrap, prefix, stack_db)
    topics = Topics(prefix)
    # inbound and events created here, led by one broker; the services create the other topics.
    led = [(topics.inbound, "inbound"), (topics.events, "events")]
    await create_led_by(bootstrap, led, settings.kafka.partitions, VICTIM, MIN_IN_SYNC)
    stack = failover_stack(settings, tmp_path)
    stack.start()
    try:
        await stack.wait(ready=True, timeout=180)
        described = await check_replication(bootstrap, topics.all())
        assert {p["leader"] for name, _ in led for p in described[name]} == {VICTIM}, described
        async with httpx.AsyncClient(timeout=30) as http:
            traffic = Traffic(http, stack)
            try:
                await asyncio.gather(*(traffic.start(f"before-{i}") for i in range(CONVERSATIONS // 2)))
                await asyncio.sleep(0.5)  # accepted, now streaming
                in_flight, killed_at = traffic.in_flight(), time.monotonic()
                await cluster_ops.call(partial(cluster.stop_node, VICTIM, signal.SIGKILL))
                await asyncio.gather(*(traffic.start(f"after-{i}") for i in range(CONVERSATIONS // 2)))
                await traffic.all_answered(ANSWER_TIMEOUT_S)
                probe = traffic.conversations["after-0"].answered  # posted right at the kill
                recover_s = -1.0 if probe is None else probe - killed_at
                moved = await partitions(bootstrap, [name for name, _ in led])
                assert all(p["leader"] not in (VICTIM, -1) for parts in moved.values() for p in parts), moved
                await asyncio.sleep(2.0)  # a duplicate would show by now
                fault = "kill -9 leader of inbound+events"
                row = await tally(traffic, bootstrap, prefix, fault, in_flight, recover_s)
            finally:
                await traffic.close()
        await cluster_ops.call(partial(cluster.start_node, VICTIM))
        await wait_in_sync(bootstrap, topics.all())
    finally:
        stack.terminate()
    report(row)


async def test_rolling_restart_of_all_three_brokers_under_traffic(
    cluster_ops: ClusterOps, stack_db: str, tmp_path: Path
) -> None:
    cluster = cluster_ops.cluster
    await all_nodes_up(cluster_ops)
    bootstrap, prefix = cluster.bootstrap_servers, f"fo{uuid.uuid4().hex[:6]}."
    settings = failover_settings(bootstrap, prefix, stack_db)
    names = Topics(prefix).all()
    stack = failover_stack(settings, tmp_path)
    stack.start()
    try:
        await stack.wait(ready=True, timeout=180)
        await check_replication(bootstrap, names)
        waits: list[float] = []
        in_flight = 0
        async with httpx.AsyncClient(timeout=30) as http:
            traffic = Traffic(http, stack)
            try:
                for node in cluster.nodes:
                    await asyncio.gather(*(traffic.start(f"n{node.node_id}-before-{i}") for i in range(3)))
                    await asyncio.sleep(0.5)
                    in_flight, stopped_at = in_flight + traffic.in_flight(), time.monotonic()
                    await cluster_ops.call(partial(cluster.stop_node, node.node_id))
                    down = [traffic.start(f"n{node.node_id}-down-{i}") for i in range(3)]
                    await asyncio.gather(*down)
                    await cluster_ops.call(partial(cluster.start_node, node.node_id))
                    await wait_in_sync(bootstrap, [*names, "__consumer_offsets"])
                    waits.append(stopped_at)
                await asyncio.gather(*(traffic.start(f"after-{i}") for i in range(CONVERSATIONS - 18)))
                await traffic.all_answered(ANSWER_TIMEOUT_S)
                probes = [traffic.conversations[f"n{node.node_id}-down-0"].answered for node in cluster.nodes]
                recover_s = max((p - t if p is not None else -1.0) for p, t in zip(probes, waits, strict=True))
                await asyncio.sleep(2.0)
                fault = "rolling restart of 3 brokers"
                row = await tally(traffic, bootstrap, prefix, fault, in_flight, recover_s)
            finally:
                await traffic.close()
    finally:
        stack.terminate()
    report(row)
