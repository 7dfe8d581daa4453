"""Chaos helpers for Apache Kafka broker failover: a 3-node cluster driven from one long-lived thread,
its partitions' leaders and replicas read with the admin client, and conversations through ingress's
front door followed to their answers on the memory platform (`tests/chaos/broker_stack.py`'s stack)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from agentstream.contracts import RunEventAdapter, RunFinished, RunStarted, conversation_key
from agentstream.kafka.topics import topic_named
from agentstream_testing.kafka import read_to_end
from agentstream_testing.kafka_jvm import KafkaJvmCluster
from tests.chaos.broker_stack import Stack, chat_texts, post
from tests.e2e.conftest import DEMO_ANSWER

T = TypeVar("T")
RETRY_PAUSE_S = 0.3  # a client's pause before it posts a refused message again (same id)
WATCH_INTERVAL_S = 0.25


class ClusterOps:
    """The cluster's nodes are started and stopped from one thread that lives as long as the cluster:
    the nodes die with the thread that started them (`KafkaJvmCluster`), and a JVM's start takes
    seconds the test's event loop keeps running through (its traffic and clocks go on)."""

    def __init__(self, cluster: KafkaJvmCluster) -> None:
        self.cluster = cluster
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-cluster")

    def run(self, call: Callable[[], T]) -> T:
        return self._thread.submit(call).result()

    async def call(self, call: Callable[[], T]) -> T:
        return await asyncio.wrap_future(self._thread.submit(call))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.run(self.cluster.stop)
        self._thread.shutdown()


async def _admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    return admin


async def partitions(bootstrap: str, topics: list[str]) -> dict[str, list[dict[str, Any]]]:
    """topic → its partitions as the metadata gives them (`partition`, `leader`, `replicas`, `isr`)."""
    admin = await _admin(bootstrap)
    try:
        return {
            t["topic"]: sorted(t["partitions"], key=lambda p: p["partition"])
            for t in await admin.describe_topics(topics)
        }
    finally:
        await admin.close()


async def min_insync(bootstrap: str, topics: list[str]) -> dict[str, str]:
    """topic → its min.insync.replicas."""
    admin = await _admin(bootstrap)
    try:
        resources = [ConfigResource(ConfigResourceType.TOPIC, topic) for topic in topics]
        out: dict[str, str] = {}
        for response in await admin.describe_configs(resources):
            for _, _, _, name, entries in response.resources:
                out[name] = next(value for key, value, *_ in entries if key == "min.insync.replicas")
        return out
    finally:
        await admin.close()


async def create_led_by(bootstrap: str, topics: list[tuple[str, str]], count: int, leader: int, min_isr: int) -> None:
    """(name, registry short name) topics of `count` partitions on all three nodes, `leader` the
    first replica (the leader once created) of every partition: one broker to kill leads them all."""
    others = [node for node in (1, 2, 3) if node != leader]
    admin = await _admin(bootstrap)
    try:
        await admin.create_topics(
            [
                NewTopic(
                    name,
                    -1,
                    -1,
                    replica_assignments={p: [leader, *(others if p % 2 == 0 else others[::-1])] for p in range(count)},
                    topic_configs=topic_named(short).config(min_isr),
                )
                for name, short in topics
            ]
        )
    finally:
        await admin.close()


async def wait_in_sync(bootstrap: str, topics: list[str], timeout: float = 90.0) -> float:
    """Until every partition of `topics` has all its replicas in sync again; the seconds it took."""
    start = time.monotonic()
    async with asyncio.timeout(timeout):
        while True:
            with contextlib.suppress(Exception):  # a node still starting may answer with an error
                described = await partitions(bootstrap, topics)
                if len(described) == len(topics) and all(
                    part["leader"] >= 0 and sorted(part["isr"]) == sorted(part["replicas"])
                    for parts in described.values()
                    for part in parts
                ):
                    return time.monotonic() - start
            await asyncio.sleep(0.5)


@dataclass
class Conversation:
    """One message posted until ingress accepted it (202), and when its answer showed."""

    chat: str
    message_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    first_sent: float = field(default_factory=time.monotonic)
    accepted: float | None = None
    refused: int = 0
    answered: float | None = None


class Traffic:
    """Conversations as a client has them: each message posted again with the same id until it is
    accepted (a 503 says the broker did not take it), every chat watched for its answer."""

    def __init__(self, http: httpx.AsyncClient, stack: Stack) -> None:
        self.http, self.stack = http, stack
        self.conversations: dict[str, Conversation] = {}
        self._watching = asyncio.create_task(self._watch())

    async def converse(self, chat: str) -> Conversation:
        conversation = self.conversations[chat] = Conversation(chat)
        while True:
            resp = await post(self.http, self.stack.url("ingress"), chat, message_id=conversation.message_id)
            if resp.status_code == 202:
                conversation.accepted = time.monotonic()
                return conversation
            assert resp.status_code == 503, resp.text
            conversation.refused += 1
            await asyncio.sleep(RETRY_PAUSE_S)

    def in_flight(self) -> int:
        """Conversations accepted and not answered yet."""
        return sum(c.accepted is not None and c.answered is None for c in self.conversations.values())

    def start(self, chat: str) -> asyncio.Task[Conversation]:
        return asyncio.create_task(self.converse(chat), name=f"converse:{chat}")

    async def _watch(self) -> None:
        while True:
            for conversation in list(self.conversations.values()):
                if conversation.answered is None and conversation.accepted is not None:
                    texts = await chat_texts(self.http, self.stack.url("delivery"), conversation.chat)
                    if DEMO_ANSWER in texts:
                        conversation.answered = time.monotonic()
            await asyncio.sleep(WATCH_INTERVAL_S)

    async def all_answered(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    if all(c.answered is not None for c in self.conversations.values()):
                        return
                    await asyncio.sleep(WATCH_INTERVAL_S)

    async def close(self) -> None:
        self._watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watching


@dataclass(frozen=True)
class FailoverRow:
    """One line of the failover table (docs/deploy.md "Kafka settings for production")."""

    fault: str
    in_flight: int  # accepted, not yet answered when the fault came (summed over the faults)
    runs: int
    exact: int
    duplicates: int
    lost: int
    recover_s: float
    unfinished_runs: int
    inbound_missing: int
    refused_503: int

    def line(self) -> str:
        return (
            f"failover | fault={self.fault} in_flight={self.in_flight} runs={self.runs} exact={self.exact} duplicates={self.duplicates} "
            f"lost={self.lost} recover_s={self.recover_s:.1f} unfinished_runs={self.unfinished_runs} "
            f"inbound_missing={self.inbound_missing} refused_503={self.refused_503}"
        )


async def tally(
    traffic: Traffic, bootstrap: str, prefix: str, fault: str, in_flight: int, recover_s: float
) -> FailoverRow:
    """The row of one test, read from the platform (what users saw) and the topics (what ran)."""
    chats = list(traffic.conversations)
    texts = {chat: await chat_texts(traffic.http, traffic.stack.url("delivery"), chat) for chat in chats}
    inbound = await read_to_end(bootstrap, f"{prefix}inbound")
    events = [
        RunEventAdapter.validate_json(r.value) for r in await read_to_end(bootstrap, f"{prefix}events") if r.value
    ]
    started = {e.run_id: e.conversation_key for e in events if isinstance(e, RunStarted) and e.run_id == e.root_run_id}
    finished = {e.run_id for e in events if isinstance(e, RunFinished) and e.run_id == e.root_run_id}
    runs_per_chat = {chat: sum(key == conversation_key("memory", chat) for key in started.values()) for chat in chats}
    on_inbound = b"".join(r.value or b"" for r in inbound)
    return FailoverRow(
        fault=fault,
        in_flight=in_flight,
        runs=len(chats),
        exact=sum(t == [DEMO_ANSWER] and runs_per_chat[chat] == 1 for chat, t in texts.items()),
        duplicates=sum(max(0, t.count(DEMO_ANSWER) - 1) + max(0, runs_per_chat[c] - 1) for c, t in texts.items()),
        lost=sum(DEMO_ANSWER not in t for t in texts.values()),
        recover_s=recover_s,
        unfinished_runs=len(set(started) - finished),
        inbound_missing=sum(c.message_id.encode() not in on_inbound for c in traffic.conversations.values()),
        refused_503=sum(c.refused for c in traffic.conversations.values()),
    )
