"""The lag part: the consumer lag of a service's groups (metrics/lag.py `ConsumerLag`), read every
`kafka.lag_interval_s` from the start on (0: off) by a client of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from agentstream.config import KafkaSettings
from agentstream.metrics.lag import ConsumerLag, LagMetrics, Subscription


class ServiceLag:
    def __init__(self, kafka: KafkaSettings, service: str, registry: CollectorRegistry, log: Any) -> None:
        self.kafka = kafka
        self.service = service
        self.log = log
        self.metrics = LagMetrics(registry)
        self._lag: ConsumerLag | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, subscriptions: Sequence[Subscription]) -> None:
        interval = self.kafka.lag_interval_s
        if interval <= 0 or not subscriptions:
            return
        self._lag = ConsumerLag(
            self.kafka,
            list(subscriptions),
            self.metrics,
            self.log,
            interval_s=interval,
            client_id=f"{self.kafka.client_id}-{self.service}-lag",
        )
        self._task = asyncio.create_task(self._lag.run(), name=f"{self.service}-consumer-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task})
        if self._lag is not None:
            await self._lag.close()
