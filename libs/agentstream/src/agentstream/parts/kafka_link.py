"""The Kafka part: a service's broker, the consumers it reads with, and what keeps them right.

It starts and stops the FastStream broker and the `Consumer`s registered with `consuming`, runs
the periodic health check (kafka/health.py: is Kafka there, with our topics, the same cluster),
holds every commit while Kafka is lost, and restarts the consumers from the beginning when the
broker came back as a new cluster (a restarted embedded broker), then calls `on_new_cluster`.
`final_step` bounds a commit or flush on the way out. On Tansu only, it also owns the idle part
(kafka/tansu_idle.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import Any, TypeVar

from faststream.kafka import KafkaBroker

from agentstream.config import Settings
from agentstream.kafka import Topics, consumer_options
from agentstream.kafka.commits import CommitPoints
from agentstream.kafka.consumer import AnyConsumer, Source
from agentstream.kafka.guard import handler_guard
from agentstream.kafka.health import BrokerHealth
from agentstream.kafka.internals import (
    consumers_of,
    detach_consumer,
    has_consumer_subgroup,
    hold_commits,
    release_commits,
)
from agentstream.kafka.producer import OutputGate
from agentstream.kafka.tansu_idle import IdleGating, idle_gating
from agentstream.kafka.topics import consumer_group
from agentstream.metrics.lag import Subscription
from agentstream.observability import NotReady
from agentstream.parts.dead_letters import DeadLetters

C = TypeVar("C", bound=AnyConsumer)

# A stop ends within 10 s whatever Kafka does: final commits/flushes get FINAL_STEP_TIMEOUT_S
# (skipped at once while Kafka is known unavailable), the broker's own stop STOP_TIMEOUT_S.
STOP_TIMEOUT_S = 5.0
FINAL_STEP_TIMEOUT_S = 3.0
OLD_CONSUMER_STOP_S = 10.0
PING_TIMEOUT_S = 2.0


class KafkaLink:
    def __init__(
        self,
        settings: Settings,
        service: str,
        broker: KafkaBroker,
        topics: Topics,
        log: Any,
        dead_letters: DeadLetters,
    ) -> None:
        self.settings = settings
        self.service = service
        self.broker = broker
        self.log = log
        self.dead_letters = dead_letters
        self._on_new_cluster: Callable[[], Awaitable[None]] | None = None  # the service's, given to `start`
        # Innermost middleware: no handler exception is lost (see kafka/guard.py).
        broker.add_middleware(handler_guard(dead_letters.handler_failed))
        self.consumers: list[AnyConsumer] = []  # started, stopped and restarted with the broker
        self.health = BrokerHealth(
            settings.kafka,
            topics.all(),
            log,
            client_id=f"{settings.kafka.client_id}-{service}-health",
            on_new_cluster=self._restart_consumers,
            on_lost=lambda: self._each_consumer(hold_commits),
            on_back=lambda: self._each_consumer(release_commits),
            output=OutputGate(broker, log),
        )
        self._health_task: asyncio.Task[None] | None = None
        # Only on a broker that needs it (Tansu): idle consumers paused, woken by the doorbell.
        self.idle: IdleGating | None = idle_gating(settings.kafka, service)
        self._abandoned: set[asyncio.Task[Any]] = set()  # old consumers still stopping

    # -- consumers -------------------------------------------------------------------
    @property
    def group_id(self) -> str:
        return consumer_group(self.settings.kafka, self.service)

    @property
    def source(self) -> Source:
        """What this service's consumers share (kafka/consumer.py)."""
        return Source(
            self.broker,
            self.service,
            self.log,
            consumer_options(self.settings.kafka),
            self.dead_letters.record,
            self.dead_letters.record_failed,
        )

    def consuming(self, consumer: C) -> C:
        """`consumer`, started, stopped and restarted with the broker."""
        self.consumers.append(consumer)
        return consumer

    def subscriptions(self) -> list[Subscription]:
        """The consumer groups of the broker's subscribers and the topics each reads."""
        topics: dict[str, list[str]] = {}
        for sub in self.broker.subscribers:
            group = getattr(sub, "group_id", None)
            if group:
                topics.setdefault(group, []).extend(getattr(sub, "topic_names", ()))
        return [Subscription(group, tuple(dict.fromkeys(names))) for group, names in topics.items() if names]

    # -- lifecycle -------------------------------------------------------------------
    async def start(
        self, background: Collection[str] = (), on_new_cluster: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """The consumers' rounds, the broker, the first health check and its periodic one, and
        (Tansu) the idle gates; `background`: topics no one's message arrives on (end_watch.py);
        `on_new_cluster`: called once the consumers restarted on a new cluster."""
        self._on_new_cluster = on_new_cluster
        for consumer in self.consumers:
            consumer.start()
        await self.broker.start()
        await self.health.check()
        self._health_task = asyncio.create_task(self.health.run(), name=f"{self.service}-kafka-health")
        if self.idle is not None:
            self.idle.start(self.broker, background=background)

    async def stop_gates(self) -> None:
        """The idle gates resume their consumers and end (a drain pauses partitions of its own)."""
        if self.idle is not None:
            await self.idle.stop_gates()

    async def stop_watching(self) -> None:
        """The health check and the idle part end; the broker still runs."""
        if self._health_task is not None:
            self._health_task.cancel()
            await asyncio.wait({self._health_task})
        if self.idle is not None:
            await self.idle.stop()

    async def stop(self) -> None:
        """The broker, bounded (aiokafka can retry forever against a dead broker), then the consumers."""
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.broker.stop()
        except TimeoutError:
            self.log.warning("broker did not stop in time; abandoning it", timeout_s=STOP_TIMEOUT_S)
        finally:
            for consumer in self.consumers:
                await consumer.stop()

    async def ready(self) -> bool:
        """Raises `NotReady` unless the last check found Kafka and it answers a ping now."""
        self.health.raise_if_down()
        # The periodic check may be up to an interval old: a ping says at once that the broker went away.
        if not await self.broker.ping(timeout=PING_TIMEOUT_S):
            raise NotReady("kafka not answering")
        return True

    async def final_step(self, step: Awaitable[object], what: str) -> None:
        """A commit or flush on the way out: bounded by FINAL_STEP_TIMEOUT_S, skipped while Kafka is
        known to be unavailable (it cannot succeed; the records are read again after a restart)."""
        if not self.health.ok:
            if asyncio.iscoroutine(step):
                step.close()
            self.log.warning(f"{what} skipped: kafka unavailable", reason=self.health.reason)
            return
        try:
            async with asyncio.timeout(FINAL_STEP_TIMEOUT_S):
                await step
        except TimeoutError:
            self.log.warning(f"{what} did not finish in time; abandoned", timeout_s=FINAL_STEP_TIMEOUT_S)

    # -- a new cluster ---------------------------------------------------------------
    async def _restart_consumers(self) -> None:
        """The broker lost everything (a restarted embedded broker): the consumers' positions point
        into records that no longer exist. New consumers join afresh and read the new topics from
        the beginning; the old ones must not commit their positions on the way out."""
        self._each_consumer(hold_commits)  # held already since the loss was seen; a fast restart was not
        old = []
        for sub in self.broker.subscribers:
            if has_consumer_subgroup(sub):  # not a kind we build; FastStream's own stop
                await sub.stop()
                continue
            consumer = detach_consumer(sub)
            await sub.stop()  # without its consumer: ends the consume task, nothing that can hang
            if consumer is not None:
                old.append(consumer)
        for points in self._commit_points():
            points.reset()
        await self._close_consumers(old)
        for sub in self.broker.subscribers:
            await sub.start()
        self.log.warning("consumers restarted on the new kafka cluster", subscribers=len(self.broker.subscribers))
        if self._on_new_cluster is not None:
            await self._on_new_cluster()

    async def _close_consumers(self, consumers: list[Any]) -> None:
        """Stop the old consumers, but never wait on them for long: one stuck in a rebalance callback
        (waiting for acks the lost broker never sends) would hold the restart forever, and aiokafka's
        stop does not always give way to a cancellation. A consumer still stopping is left to finish."""
        if not consumers:
            return
        stopping = {asyncio.create_task(c.stop(), name=f"{self.service}-old-consumer-stop") for c in consumers}
        _, pending = await asyncio.wait(stopping, timeout=OLD_CONSUMER_STOP_S)
        if pending:
            self.log.warning(
                "old consumers did not stop in time; left behind", count=len(pending), timeout_s=OLD_CONSUMER_STOP_S
            )
            self._abandoned |= pending
            for task in pending:
                task.add_done_callback(self._abandoned.discard)

    def _each_consumer(self, action: Callable[[Any], None]) -> None:
        for sub in self.broker.subscribers:
            for consumer in consumers_of(sub):
                action(consumer)

    def _commit_points(self) -> list[CommitPoints]:
        """The `CommitPoints` of this service's consumers."""
        return [points for consumer in self.consumers if (points := consumer.points) is not None]
