"""What every service is made of: `Infra`, built once by the service's `bootstrap`; `Runtime`, the
parts (`agentstream.parts`, `agentstream.publishing`) composed over it and the order they start,
drain and stop in; and `Service`, the lifecycle `ServiceHost` and the stacks run.

No service inherits any of it (docs/decisions.md § Service parts): `bootstrap` builds the infra and
the runtime with the readiness checks the service needs (the database's only where there is one)
and passes them in; the service holds the runtime, calls its parts, and implements `Service` by
handing its own steps to `Runtime.start`, `Runtime.drain` and `Runtime.stop`. Each part is its own
module: the publisher (`publishing.Publisher`), dead letters (`parts/dead_letters.py`), readiness
and the ops HTTP app (`parts/readiness.py`), the drain (`parts/drain.py`), consumer lag
(`parts/lag.py`) and the broker with its consumers, health and restarts (`parts/kafka_link.py`).
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from fastapi import FastAPI
from faststream.kafka import KafkaBroker
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from agentstream.auth import Authenticator
from agentstream.config import Settings
from agentstream.db import create_engine, session_factory
from agentstream.kafka import Topics, consumer_options, make_broker
from agentstream.kafka.consumer import AnyConsumer, Source
from agentstream.kafka.flavor import tuning
from agentstream.kafka.health import BrokerHealth
from agentstream.kafka.topics import R, Topic
from agentstream.metrics import new_registry
from agentstream.metrics.lag import Subscription
from agentstream.observability import NotReady, ReadyCheck, get_logger, record_log_context, record_task_context
from agentstream.parts.dead_letters import DeadLetters
from agentstream.parts.drain import Drain
from agentstream.parts.kafka_link import FINAL_STEP_TIMEOUT_S, KafkaLink
from agentstream.parts.lag import ServiceLag
from agentstream.parts.readiness import Readiness
from agentstream.publishing import Publisher
from agentstream.tracing import NO_TRACING, Tracing, tracing_for

C = TypeVar("C", bound=AnyConsumer)

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
    """What every service is built on, made once by the service's `bootstrap` and passed to its `Runtime`.

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


Step = Callable[[], Awaitable[None]]


async def _nothing() -> None:
    """A step a service does not take (`Runtime.start`, `drain`, `stop`)."""


class Service(Protocol):
    """What `ServiceHost` and the stacks run: a name, an ops HTTP app, and the three steps of a
    lifecycle (start; drain, the first step of a stop; stop). The five services implement it
    structurally, each over its own `Runtime`; nothing inherits it."""

    @property
    def name(self) -> str: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def registry(self) -> CollectorRegistry: ...

    @property
    def http(self) -> FastAPI: ...

    async def start(self) -> None: ...

    async def drain(self, grace_s: float) -> None: ...

    async def stop(self) -> None: ...


class Runtime:
    """One service's parts over its `Infra`, and the order they start, drain and stop in.

    Built by the service's `bootstrap` and held by the service (composition: docs/decisions.md
    § Service parts). `checks` are `/readyz` checks after the broker's, in order (a service with a
    database passes `{"database": database_ready(engine)}`); a service adds its own with
    `readiness.add`. The service's own steps are passed to `start`, `drain` and `stop`.
    """

    def __init__(self, infra: Infra, *, checks: Mapping[str, ReadyCheck] | None = None) -> None:
        self.infra = infra
        self.name = infra.name
        self.settings = infra.settings
        self.topics = infra.topics
        self.registry = infra.registry
        self.log = infra.log
        self.broker: KafkaBroker = infra.broker
        self.publisher: Publisher = infra.publisher
        self.started = False
        self.dead_letters = DeadLetters(infra.publisher, infra.registry, self.name, infra.log)
        self.kafka = KafkaLink(infra.settings, self.name, infra.broker, infra.topics, infra.log, self.dead_letters)
        self.lag = ServiceLag(infra.settings.kafka, self.name, infra.registry, infra.log)
        self.drainer = Drain(self.name, infra.registry, infra.log)
        self.readiness = Readiness(self.name, infra.registry, infra.auth)
        self.readiness.add("broker", self._broker_ready)
        for name, check in (checks or {}).items():
            self.readiness.add(name, check)
        self.http: FastAPI = self.readiness.http

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """A counter in this service's own registry (the one `/metrics` serves)."""
        return Counter(name, documentation, labels, registry=self.registry)

    # -- what the parts offer a service ------------------------------------------------
    @property
    def draining(self) -> bool:
        """Asked to stop: no new work, what runs finishes (`drain`)."""
        return self.drainer.draining

    @property
    def broker_health(self) -> BrokerHealth:
        return self.kafka.health

    @property
    def source(self) -> Source:
        return self.kafka.source

    @property
    def group_id(self) -> str:
        return self.kafka.group_id

    def consuming(self, consumer: C) -> C:
        """`consumer`, started, stopped and restarted with this service."""
        return self.kafka.consuming(consumer)

    def subscriber_options(self) -> dict[str, Any]:
        return {"group_id": self.group_id, **consumer_options(self.settings.kafka)}

    def subscriptions(self) -> list[Subscription]:
        return self.kafka.subscriptions()

    async def final_step(self, step: Awaitable[object], what: str) -> None:
        await self.kafka.final_step(step, what)

    def cut(self, what: str, count: int) -> None:
        self.drainer.cut(what, count)

    async def publish(self, topic: Topic[R], record: R, key: str | None = None) -> None:
        """Publish and wait until the broker has stored the record (agentstream.publishing)."""
        await self.publisher.publish(topic, record, key)

    async def publish_nowait(self, topic: Topic[R], record: R, key: str | None = None) -> asyncio.Future[Any]:
        """Hand the record to the producer and return the future of its ack (agentstream.publishing)."""
        return await self.publisher.publish_nowait(topic, record, key)

    def publish_batched(self, topic: Topic[R], record: R, key: str | None = None) -> asyncio.Future[None]:
        """Queue the record to leave with the others queued in this turn of the event loop, one
        record batch per partition; the future of its ack (agentstream.publishing)."""
        return self.publisher.publish_batched(topic, record, key)

    async def dead_letter_record(self, raw: Any, error: str, value: bytes | None = None) -> None:
        await self.dead_letters.record(raw, error, value)

    def count_dead_letter(self, topic: str, error: str) -> None:
        self.dead_letters.count(topic, error)

    def log_context(self, record: object = None, **fields: str | None) -> AbstractContextManager[None]:
        """Log lines inside carry this service and `record`'s run and conversation (see
        `observability.record_log_context`); every handler wraps a record's handling in it."""
        return record_log_context(self.name, record, **fields)

    def task_log_context(self, record: object) -> contextvars.Context:
        """The context for a task started for `record` (see `observability.record_task_context`)."""
        return record_task_context(self.name, record)

    # -- lifecycle ---------------------------------------------------------------
    async def start(
        self, on_start: Step = _nothing, *, on_new_cluster: Step = _nothing, background: Collection[str] = ()
    ) -> None:
        """`on_start` (open resources) before the broker starts consuming; `on_new_cluster` after
        the consumers restarted on a new cluster, still not ready (resend what it lost);
        `background`: topics it reads whose records are no one's message (a periodic republish),
        which against Tansu do not keep the end watcher at its fast pace (agentstream.kafka.end_watch)."""
        await on_start()
        await self.kafka.start(background=background, on_new_cluster=on_new_cluster)
        self.dead_letters.zero(self.subscriptions())
        self.lag.start(self.subscriptions())
        freeze_startup_objects()
        self.started = True
        self.log.info(
            "service started",
            bootstrap=self.settings.kafka.bootstrap_servers,
            kafka_flavor=tuning(self.settings.kafka).flavor.value,
        )

    async def drain(self, grace_s: float, on_drain: Step = _nothing) -> None:
        """The first step of a stop (SIGTERM): not ready, no new work, and up to `grace_s` for what
        runs to finish while the broker still consumes and publishes (docs/deploy.md § Stopping).
        `on_drain` stops taking new work and returns once what the service runs has finished; it
        is cancelled when the grace period ends (`stop` then cuts what is left and counts it in `cut`)."""
        if self.draining or not self.started:
            return
        self.drainer.begin()  # before anything is awaited: no run starts here from now on
        # The idle gate pauses and resumes whole consumers; a drain pauses partitions of its own.
        await self.kafka.stop_gates()
        await self.drainer.run(grace_s, on_drain)

    async def stop(self, on_stop: Step = _nothing) -> None:
        """`on_stop` (close resources) after the broker stopped, before the database closes."""
        self.started = False
        await self.kafka.stop_watching()
        await self.lag.stop()
        try:
            await self.kafka.stop()
        finally:
            await on_stop()
            await self.infra.auth.close()
            if self.infra.engine is not None:
                await self.infra.engine.dispose()
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

    async def _broker_ready(self) -> bool:
        if not self.started:
            raise NotReady("not started")
        if self.draining:  # out of the service's endpoints while what runs finishes
            raise NotReady("draining")
        return await self.kafka.ready()
