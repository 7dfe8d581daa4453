"""What every service is made of, wired in one place.

A service owns a FastStream `KafkaBroker` (its subscribers and publishers), a
Prometheus registry, an optional database engine and a FastAPI app with the ops
endpoints. Each service's `bootstrap` builds the `Infra` and the service's collaborators
and passes them in; the subclass registers its subscribers and routes in its `__init__`
and keeps handlers thin.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from faststream.kafka import KafkaBroker
from faststream.message import StreamMessage
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from agentstream.auth import Authenticator
from agentstream.config import Settings
from agentstream.contracts import DeadLetter
from agentstream.db import create_engine, session_factory
from agentstream.kafka import Topics, consumer_options, make_broker
from agentstream.kafka.commits import CommitPoints
from agentstream.kafka.consumer import AnyConsumer, Source
from agentstream.kafka.flavor import tuning
from agentstream.kafka.guard import failure_reason, handler_guard, records_of
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
from agentstream.kafka.topics import DLQ, R, Topic, consumer_group
from agentstream.metrics import DeadLetterReason, dead_letter_reason, new_registry
from agentstream.metrics.lag import ConsumerLag, LagMetrics, Subscription
from agentstream.observability import (
    NotReady,
    ReadyCheck,
    get_logger,
    http_app,
    record_log_context,
    record_task_context,
)
from agentstream.publishing import Publisher
from agentstream.tracing import NO_TRACING, Tracing, tracing_for

C = TypeVar("C", bound=AnyConsumer)

# A stop ends within 10 s whatever Kafka does: final commits/flushes get FINAL_STEP_TIMEOUT_S
# (skipped at once while Kafka is known unavailable), the broker's own stop STOP_TIMEOUT_S.
STOP_TIMEOUT_S = 5.0
FINAL_STEP_TIMEOUT_S = 3.0
OLD_CONSUMER_STOP_S = 10.0

_frozen = False


def freeze_startup_objects() -> None:
    """Everything loaded by the time a service has started (modules, SDKs, ORM, schemas) lives
    as long as the process: keep it out of the collector's full passes, which rescanned it every
    few thousand records (up to a fifth of ingress's time under load). Once per process (tests
    start many services in one)."""
    global _frozen
    if not _frozen:
        gc.freeze()
        _frozen = True


@dataclass(frozen=True, eq=False)
class Infra:
    """What every service is built on, made once by the service's `bootstrap` and passed in.

    Its collaborators (ledgers, hooks, launchers, adapters) are built from these parts before
    the service exists, so nothing is swapped once it starts. The engine is lazy: no
    connection is opened until the first query (the service's start migrates first).
    """

    settings: Settings
    name: str
    topics: Topics
    registry: CollectorRegistry
    log: Any
    broker: KafkaBroker
    auth: Authenticator
    publisher: Publisher
    engine: AsyncEngine | None = None
    sessions: async_sessionmaker | None = None  # type: ignore[type-arg]
    tracing: Tracing = NO_TRACING

    @classmethod
    def build(cls, settings: Settings, name: str, *, uses_database: bool) -> Infra:
        registry = new_registry()
        tracing = tracing_for(settings.tracing, name)
        broker = make_broker(
            settings.kafka,
            registry=registry,
            client_id=f"{settings.kafka.client_id}-{name}",
            telemetry=tracing.middleware(),
        )
        engine = create_engine(settings.database.url, echo=settings.database.echo) if uses_database else None
        sessions = session_factory(engine) if engine is not None else None
        auth = Authenticator(settings.auth, settings.database.url)
        if sessions is not None:
            auth.use_sessions(sessions)
        topics = Topics(settings.kafka.topic_prefix)
        return cls(
            settings=settings,
            name=name,
            topics=topics,
            registry=registry,
            log=get_logger(f"agentstream.{name}", service=name),
            broker=broker,
            auth=auth,
            publisher=Publisher(broker, topics, registry, name),
            engine=engine,
            sessions=sessions,
            tracing=tracing,
        )


class Service:
    """Base of the five services. `name` is the service name (`agent-runner`, …)."""

    name: ClassVar[str]
    uses_database: ClassVar[bool] = False

    def __init__(self, infra: Infra) -> None:
        self.infra = infra
        self.settings = infra.settings
        self.topics = infra.topics
        self.registry = infra.registry
        self.log = infra.log
        self.broker: KafkaBroker = infra.broker
        settings = self.settings
        # Innermost middleware: no handler exception is lost (see kafka/guard.py).
        self.broker.add_middleware(handler_guard(self.handler_failed))
        self.engine: AsyncEngine | None = infra.engine
        self.sessions: async_sessionmaker | None = infra.sessions  # type: ignore[type-arg]
        self.started = False
        self.draining = False  # asked to stop: no new work, what runs finishes (`drain`)
        self.shutdown_cuts = self.counter(
            "agentstream_shutdown_cut_total",
            "Work still running when a stop's grace period (shutdown.grace_s) ended, and cut, by what it was",
            ["service", "what"],
        )
        self.dead_letters = self.counter(
            "agentstream_dead_letters_total",
            "Records sent to the dlq, by the topic they came from and a class of the reason",
            ["service", "topic", "reason"],
        )
        self.consumers: list[AnyConsumer] = []  # started, stopped and restarted with the service
        self.broker_health = BrokerHealth(
            settings.kafka,
            self.topics.all(),
            self.log,
            client_id=f"{settings.kafka.client_id}-{self.name}-health",
            on_new_cluster=self._restart_consumers,
            on_lost=lambda: self._each_consumer(hold_commits),
            on_back=lambda: self._each_consumer(release_commits),
            output=OutputGate(self.broker, self.log),
        )
        self._health_task: asyncio.Task[None] | None = None
        self.lag_metrics = LagMetrics(self.registry)  # read from `start` on, every `kafka.lag_interval_s`
        self._lag: ConsumerLag | None = None
        self._lag_task: asyncio.Task[None] | None = None
        # Only on a broker that needs it (Tansu): idle consumers paused, woken by the doorbell.
        self.idle: IdleGating | None = idle_gating(settings.kafka, self.name)
        # Topics it reads whose records are no one's message (a periodic republish): against
        # Tansu they do not keep the end watcher at its fast pace (agentstream.kafka.end_watch).
        self.background_topics: frozenset[str] = frozenset()
        self._abandoned: set[asyncio.Task[Any]] = set()  # old consumers still stopping
        # Subclasses may add checks in their `__init__`; `/readyz` reads this dict on every request.
        self.ready_checks: dict[str, ReadyCheck] = {"broker": self._broker_ready}
        if self.uses_database:
            self.ready_checks["database"] = self._db_ready
        self.auth = infra.auth
        self.http = http_app(self.name, self.registry, self.ready_checks, self.auth)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """A counter in this service's own registry (the one `/metrics` serves)."""
        return Counter(name, documentation, labels, registry=self.registry)

    @property
    def source(self) -> Source:
        """What this service's consumers share (kafka/consumer.py)."""
        return Source(
            self.broker,
            self.name,
            self.log,
            consumer_options(self.settings.kafka),
            self.dead_letter_record,
            self.record_failed,
        )

    def consuming(self, consumer: C) -> C:
        """`consumer`, started, stopped and restarted with this service."""
        self.consumers.append(consumer)
        return consumer

    # -- to override -------------------------------------------------------------
    async def on_start(self) -> None:
        """Open resources before the broker starts consuming."""

    async def on_stop(self) -> None:
        """Close resources after the broker stopped."""

    async def on_new_cluster(self) -> None:
        """After the consumers restarted on a new cluster, still not ready: resend what it lost."""

    async def on_drain(self) -> None:
        """Stop taking new work and return once what this service runs has finished; cancelled
        when the grace period ends (`stop` then cuts what is left and counts it in `cut`)."""

    # -- lifecycle ---------------------------------------------------------------
    @property
    def group_id(self) -> str:
        return consumer_group(self.settings.kafka, self.name)

    def subscriber_options(self) -> dict[str, Any]:
        return {"group_id": self.group_id, **consumer_options(self.settings.kafka)}

    async def start(self) -> None:
        await self.on_start()
        for consumer in self.consumers:
            consumer.start()
        await self.broker.start()
        self._zero_dead_letters()
        await self.broker_health.check()
        self._health_task = asyncio.create_task(self.broker_health.run(), name=f"{self.name}-kafka-health")
        self._start_lag()
        if self.idle is not None:
            self.idle.start(self.broker, background=self.background_topics)
        freeze_startup_objects()
        self.started = True
        self.log.info(
            "service started",
            bootstrap=self.settings.kafka.bootstrap_servers,
            kafka_flavor=tuning(self.settings.kafka).flavor.value,
        )

    async def drain(self, grace_s: float) -> None:
        """The first step of a stop (SIGTERM): not ready, no new work, and up to `grace_s` for what
        runs to finish while the broker still consumes and publishes (docs/deploy.md § Stopping)."""
        if self.draining or not self.started:
            return
        self.draining = True
        # The idle gate pauses and resumes whole consumers; a drain pauses partitions of its own.
        if self.idle is not None:
            await self.idle.stop_gates()
        self.log.info("draining", grace_s=grace_s)
        try:
            async with asyncio.timeout(grace_s):
                await self.on_drain()
        except TimeoutError:
            self.log.warning("grace period over: what still runs is cut", grace_s=grace_s)
        else:
            self.log.info("drained")

    def cut(self, what: str, count: int) -> None:
        """`count` pieces of work (`what`: runs, tool calls, streams) cut by a stop."""
        if count:
            self.shutdown_cuts.labels(self.name, what).inc(count)
            self.log.warning("cut by the stop", what=what, count=count)

    async def stop(self) -> None:
        self.started = False
        for task in (self._health_task, self._lag_task):
            if task is not None:
                task.cancel()
                await asyncio.wait({task})
        if self.idle is not None:
            await self.idle.stop()
        if self._lag is not None:
            await self._lag.close()
        try:
            # aiokafka can retry forever against a dead broker; a shutdown must end.
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.broker.stop()
        except TimeoutError:
            self.log.warning("broker did not stop in time; abandoning it", timeout_s=STOP_TIMEOUT_S)
        finally:
            for consumer in self.consumers:
                await consumer.stop()
            await self.on_stop()
            await self.auth.close()
            if self.engine is not None:
                await self.engine.dispose()
            await self._stop_tracing()
        self.log.info("service stopped")

    async def _stop_tracing(self) -> None:
        """Export the spans still buffered. In a thread: the exporter's HTTP calls block, and a
        collector that is away must not hold the stop past FINAL_STEP_TIMEOUT_S."""
        if not self.infra.tracing.enabled:
            return
        try:
            async with asyncio.timeout(FINAL_STEP_TIMEOUT_S):
                await asyncio.to_thread(self.infra.tracing.shutdown)
        except TimeoutError:
            self.log.warning("spans not exported in time; abandoned", timeout_s=FINAL_STEP_TIMEOUT_S)

    def subscriptions(self) -> list[Subscription]:
        """The consumer groups of this service's subscribers and the topics each reads."""
        topics: dict[str, list[str]] = {}
        for sub in self.broker.subscribers:
            group = getattr(sub, "group_id", None)
            if group:
                topics.setdefault(group, []).extend(getattr(sub, "topic_names", ()))
        return [Subscription(group, tuple(dict.fromkeys(names))) for group, names in topics.items() if names]

    def _zero_dead_letters(self) -> None:
        """Every (topic read, reason) series exists from the start at 0: a rate over a series that
        appears with its first dead letter misses that letter, and the alert would stay quiet."""
        for subscription in self.subscriptions():
            for topic in subscription.topics:
                for reason in DeadLetterReason:
                    self.dead_letters.labels(self.name, topic, reason.value)

    def _start_lag(self) -> None:
        interval = self.settings.kafka.lag_interval_s
        if interval <= 0 or not (subscriptions := self.subscriptions()):
            return
        self._lag = ConsumerLag(
            self.settings.kafka,
            subscriptions,
            self.lag_metrics,
            self.log,
            interval_s=interval,
            client_id=f"{self.settings.kafka.client_id}-{self.name}-lag",
        )
        self._lag_task = asyncio.create_task(self._lag.run(), name=f"{self.name}-consumer-lag")

    async def final_step(self, step: Awaitable[object], what: str) -> None:
        """A commit or flush on the way out: bounded by FINAL_STEP_TIMEOUT_S, skipped while Kafka is
        known to be unavailable (it cannot succeed; the records are read again after a restart)."""
        if not self.broker_health.ok:
            if asyncio.iscoroutine(step):
                step.close()
            self.log.warning(f"{what} skipped: kafka unavailable", reason=self.broker_health.reason)
            return
        try:
            async with asyncio.timeout(FINAL_STEP_TIMEOUT_S):
                await step
        except TimeoutError:
            self.log.warning(f"{what} did not finish in time; abandoned", timeout_s=FINAL_STEP_TIMEOUT_S)

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
        await self.on_new_cluster()

    async def _close_consumers(self, consumers: list[Any]) -> None:
        """Stop the old consumers, but never wait on them for long: one stuck in a rebalance callback
        (waiting for acks the lost broker never sends) would hold the restart forever, and aiokafka's
        stop does not always give way to a cancellation. A consumer still stopping is left to finish."""
        if not consumers:
            return
        stopping = {asyncio.create_task(c.stop(), name=f"{self.name}-old-consumer-stop") for c in consumers}
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

    async def _broker_ready(self) -> bool:
        if not self.started:
            raise NotReady("not started")
        if self.draining:  # out of the Service's endpoints while what runs finishes
            raise NotReady("draining")
        self.broker_health.raise_if_down()
        # The periodic check may be up to an interval old: a ping says at once that the broker went away.
        if not await self.broker.ping(timeout=2.0):
            raise NotReady("kafka not answering")
        return True

    async def _db_ready(self) -> bool:
        if self.engine is None:
            return False
        async with asyncio.timeout(2.0), self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return True

    # -- helpers for handlers ----------------------------------------------------
    async def publish(self, topic: Topic[R], record: R, key: str | None = None) -> None:
        """Publish and wait until the broker has stored the record (agentstream.publishing)."""
        await self.infra.publisher.publish(topic, record, key)

    async def publish_nowait(self, topic: Topic[R], record: R, key: str | None = None) -> asyncio.Future[Any]:
        """Hand the record to the producer and return the future of its ack (agentstream.publishing)."""
        return await self.infra.publisher.publish_nowait(topic, record, key)

    async def dead_letter_record(self, raw: Any, error: str, value: bytes | None = None) -> None:
        """`dead_letter` for an aiokafka `ConsumerRecord` (one record of a batch)."""
        raw_key = getattr(raw, "key", None)
        key = raw_key.decode("utf-8", "replace") if isinstance(raw_key, bytes) else None
        if value is None:
            value = raw_value if isinstance(raw_value := getattr(raw, "value", None), bytes) else b""
        letter = DeadLetter(
            source_topic=getattr(raw, "topic", ""),
            source_partition=getattr(raw, "partition", None),
            source_offset=getattr(raw, "offset", None),
            key=key,
            raw_value=value.decode("utf-8", "replace"),
            error=error,
            service=self.name,
        )
        await self.publish(DLQ, letter)
        self.count_dead_letter(letter.source_topic, error)
        self.log.warning("dead letter", **letter.coordinates(), error=error)

    def log_context(self, record: object = None, **fields: str | None) -> AbstractContextManager[None]:
        """Log lines inside carry this service and `record`'s run and conversation (see
        `observability.record_log_context`); every handler wraps a record's handling in it."""
        return record_log_context(self.name, record, **fields)

    def task_log_context(self, record: object) -> contextvars.Context:
        """The context for a task started for `record` (see `observability.record_task_context`)."""
        return record_task_context(self.name, record)

    def count_dead_letter(self, topic: str, error: str) -> None:
        self.dead_letters.labels(self.name, topic, dead_letter_reason(error)).inc()

    async def handler_failed(self, msg: StreamMessage[Any], err: Exception) -> None:
        """A handler raised what it did not expect: log where the record sits, dead-letter it
        (the type and first line of the error, never a traceback), and read on."""
        for i, raw in enumerate(records_of(msg)):
            # The traceback once per failure (in the log only); a batch names every record.
            await self.record_failed(raw, err, traceback=i == 0)

    async def record_failed(self, raw: Any, err: Exception, *, traceback: bool = True) -> None:
        """`handler_failed` for one aiokafka `ConsumerRecord`: for a batch handler that handles
        its records one by one, so that one record's failure is not the whole batch's."""
        reason = failure_reason(err)
        where = {
            "topic": getattr(raw, "topic", None),
            "partition": getattr(raw, "partition", None),
            "offset": getattr(raw, "offset", None),
        }
        self.log.error("handler failed", **where, error=reason, exc_info=err if traceback else None)
        try:
            await self.dead_letter_record(raw, reason)
        except Exception as dl_err:  # the broker is gone too: the log line is all that is left
            self.log.error("dead letter not published", **where, error=failure_reason(dl_err))
