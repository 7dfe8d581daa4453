"""The hooks of one delivery service, wired from config: observers, transforms, metrics.

`on_record` is the handler of the hooks' own Kafka consumer (group `<prefix>delivery-hooks`
on `events` and `deliveries`): it maps a record to lifecycle events and queues them for
the observers. The stream consumer never waits on it. `transform` is the inline chain
the stream actors call before every send.
"""

from __future__ import annotations

import json

import structlog
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from agentstream.config import Settings
from agentstream.contracts import DeliveryReceipt, RecordType, RunEventAdapter
from agentstream.redaction import redactor_for
from agentstream_delivery.hooks.audit import AuditHook
from agentstream_delivery.hooks.base import SessionSource
from agentstream_delivery.hooks.billing import BillingHook
from agentstream_delivery.hooks.events import HookEvent, LifecycleMapper
from agentstream_delivery.hooks.metrics import HookMetrics
from agentstream_delivery.hooks.observers import ObserverPool
from agentstream_delivery.hooks.registry import HookRegistry
from agentstream_delivery.hooks.security import SecurityFilter
from agentstream_delivery.hooks.transforms import TransformChain
from agentstream_delivery.hooks.webhook import WebhookHook


class HookRuntime:
    def __init__(
        self,
        settings: Settings,
        registry: CollectorRegistry | None,
        log: structlog.stdlib.BoundLogger,
        sessions: SessionSource | None,
    ) -> None:
        conf = settings.hooks
        if sessions is None and (conf.billing.enabled or conf.audit.enabled):
            raise ValueError("hooks.billing and hooks.audit write to the database: the service needs one")
        self.log = log
        self.metrics = HookMetrics(registry)
        self.registry = HookRegistry(log)
        self.webhooks = [WebhookHook(w, i) for i, w in enumerate(conf.webhooks)]
        if conf.billing.enabled and sessions is not None:
            self.registry.add(BillingHook(sessions).as_observer())
        if conf.audit.enabled and sessions is not None:
            self.registry.add(AuditHook(sessions, conf.audit.points).as_observer())
        for hook in self.webhooks:
            self.registry.add(hook.as_observer())
        for target in conf.modules:
            self.registry.load(target)  # a configured module that is missing is a startup error
        if conf.entry_points:
            self.registry.load_entry_points()
        shared = redactor_for(settings)  # the same redaction persistence applies to what it stores
        security = SecurityFilter(shared) if shared is not None else None
        self.transform = TransformChain(
            self.registry.transforms, security, self.metrics, log, budget_s=conf.transform_budget_ms / 1000
        )
        self.mapper = LifecycleMapper()
        self.observers = ObserverPool(
            self.registry.observers, self.metrics, log, conf.queue_size, conf.observer_timeout_s
        )

    @property
    def observing(self) -> bool:
        """Whether any observer is registered (only then the hooks consumer is needed)."""
        return bool(self.registry.observers)

    def start(self) -> None:
        self.observers.start()

    async def stop(self) -> None:
        await self.observers.stop()
        for hook in self.webhooks:
            await hook.close()

    async def on_record(self, body: bytes) -> None:
        for event in self.lifecycle(body):
            await self.observers.submit(event)

    def lifecycle(self, body: bytes) -> list[HookEvent]:
        try:
            data = json.loads(body)
            if not isinstance(data, dict):
                return []
            record = (
                DeliveryReceipt.model_validate(data)
                if data.get("type") == RecordType.DELIVERY_RECEIPT
                else RunEventAdapter.validate_python(data)
            )
        except (ValueError, ValidationError):
            return []  # the stream consumer dead-letters bad events; hooks just skip them
        return self.mapper.map(record)
