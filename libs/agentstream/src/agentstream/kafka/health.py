"""Is Kafka there, with our topics? A periodic metadata request answers it.

aiokafka clients retry a lost broker forever and never say so to their owner; and a
broker that restarted without its data (the embedded Tansu keeps topics in memory)
answers every request while the topics are gone: commits fail, consumers read
nothing, and a producer with cached metadata writes into topics that do not exist.
`BrokerHealth` asks the broker for the metadata of all topics every
`kafka.health_interval_s` (a request for *all* topics never creates one, unlike a
request naming them) and keeps the answer: ready, or why not. A broker that answers
but lacks topics gets them back when `kafka.auto_create_topics` is on; otherwise the
service stays not ready until an operator creates them. Changes are logged once each
way; the readiness check, and the HTTP front door before producing, read the state.

A cluster id other than the one seen before means the records, offsets and groups
the consumers know of are gone (the embedded broker gets a fresh id on every start):
`on_new_cluster` is called once the topics are there, and the service restarts its
consumers from the beginning of the new topics. Their old positions must never be
committed into the new cluster (Tansu answers a fetch past the end with nothing, so a
consumer would wait there forever): from the moment Kafka is seen unavailable
`on_lost` holds every commit, and only the same cluster coming back releases them
(`on_back`).

The embedded broker also forgets topics its producers are about to write to: from the
same moment the `output` gate (`agentstream.kafka.producer.OutputGate`) fails the
records still pending in the producer and refuses new ones, until every topic is there
again (recreated by this check when `kafka.auto_create_topics` is on). Apache Kafka
keeps its topics across a broker restart, so there the producer's own retries are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.metadata import MetadataRequest

from agentstream.config import KafkaSettings
from agentstream.kafka.producer import OutputGate
from agentstream.kafka.security import client_security
from agentstream.kafka.topics import create_topics
from agentstream.observability import NotReady

NOT_CHECKED = "not checked yet"
RESTART_TIMEOUT_S = 120.0


class BrokerUnavailable(NotReady):
    """Kafka cannot take records now (broker not answering, or topics missing)."""


class BrokerHealth:
    def __init__(
        self,
        kafka: KafkaSettings,
        topics: Sequence[str],
        log: Any,
        client_id: str,
        on_new_cluster: Callable[[], Awaitable[None]] | None = None,
        on_lost: Callable[[], None] | None = None,
        on_back: Callable[[], None] | None = None,
        output: OutputGate | None = None,
    ) -> None:
        self.kafka = kafka
        # Only a broker that forgets its topics on a restart needs the producer held.
        self.output = output if kafka.in_memory else None
        self.on_new_cluster = on_new_cluster
        self.on_lost = on_lost
        self.on_back = on_back
        self.cluster_id: str | None = None
        self._new_cluster = False  # seen, not yet handled by `on_new_cluster`
        self._lost = False  # `on_lost` called, `on_back`/`on_new_cluster` not yet
        self.topics = list(topics)
        self.log = log
        self.client_id = client_id
        self.interval_s = kafka.health_interval_s
        self.timeout_s = max(2.0, kafka.health_interval_s)
        self.reason: str | None = NOT_CHECKED  # None: ready
        self._down_since: float | None = time.monotonic()
        self._client: AIOKafkaClient | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None

    def raise_if_down(self) -> None:
        if self.reason is not None:
            raise BrokerUnavailable(self.reason)

    async def run(self) -> None:
        """Check every `interval_s` until cancelled."""
        try:
            while True:
                await asyncio.sleep(self.interval_s)
                await self.check()
        finally:
            await self.close()

    async def check(self) -> None:
        try:
            present = await self._topics_present()
        except Exception as err:  # the type only: an exception's text may name hosts
            await self.close()  # a fresh client next time: a half-dead one may never recover
            reason = f"kafka not answering ({type(err).__name__})"
            if self.reason is None and not self._lost:
                self._lost = True
                if self.on_lost is not None:
                    self.on_lost()
            if self._lost and self.output is not None:
                self.output.hold(reason)  # every failed check: what was retried since fails too
            return self._down(reason)
        if self._new_cluster and not self._lost:  # restarted within one interval: lost all the same
            self._lost = True
            if self.on_lost is not None:
                self.on_lost()
            if self.output is not None:
                self.output.hold("kafka restarted without our records")
        missing = [t for t in self.topics if t not in present]
        if missing and self.kafka.auto_create_topics:
            try:
                async with asyncio.timeout(self.timeout_s):
                    created = await create_topics(self.kafka)
                self.log.warning("kafka topics were missing; created them again", topics=created)
                present = await self._topics_present()
                missing = [t for t in self.topics if t not in present]
            except Exception as err:
                return self._down(f"topics missing: {', '.join(missing)}; creating them failed ({type(err).__name__})")
        if missing:
            return self._down(f"topics missing: {', '.join(missing)}")
        if self.output is not None:
            self.output.release()  # every topic is there: records have somewhere to go again
        if self._new_cluster and self.on_new_cluster is not None:
            self._down("restarting the consumers on the new kafka cluster")
            try:
                # Group joins on a busy broker take many seconds; cut short, a restart leaves consumers stopped.
                async with asyncio.timeout(RESTART_TIMEOUT_S):
                    await self.on_new_cluster()
            except Exception as err:
                return self._down(f"consumers not restarted on the new cluster ({type(err).__name__})")
        elif self._lost and self.on_back is not None:
            self.on_back()
        self._new_cluster = self._lost = False
        self._up()

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _topics_present(self) -> set[str]:
        async with asyncio.timeout(self.timeout_s):
            if self._client is None:
                client = AIOKafkaClient(
                    bootstrap_servers=self.kafka.bootstrap_servers,
                    client_id=self.client_id,
                    request_timeout_ms=int(self.timeout_s * 1000),
                    **client_security(self.kafka),
                )
                try:
                    await client.bootstrap()
                except BaseException:
                    await client.close()
                    raise
                self._client = client
            node = self._client.get_random_node()
            if node is None:
                raise ConnectionError("no broker known")
            # topics=None: all of them, and never an auto-created one.
            metadata = await self._client.send(node, MetadataRequest(None, allow_auto_topic_creation=False))
        cluster_id = getattr(metadata, "cluster_id", None)
        if cluster_id is not None and cluster_id != self.cluster_id:
            if self.cluster_id is not None:
                self._new_cluster = True
                self.log.warning(
                    "kafka cluster changed: its records, offsets and groups are not the ones we knew",
                    cluster_id=cluster_id,
                    previous=self.cluster_id,
                )
            self.cluster_id = cluster_id
        return {t[1] for t in metadata.topics if t[0] == 0}  # (error_code, name, ...) in every version

    def _down(self, reason: str) -> None:
        if self.reason is None or self.reason == NOT_CHECKED:
            self._down_since = time.monotonic()
        if reason != self.reason:
            self.log.warning("kafka unavailable: not ready", reason=reason)
        self.reason = reason

    def _up(self) -> None:
        if self.reason is not None:
            since = self._down_since
            if self.reason != NOT_CHECKED:
                self.log.warning(
                    "kafka available again: ready", down_s=round(time.monotonic() - since, 1) if since else None
                )
        self.reason, self._down_since = None, None
