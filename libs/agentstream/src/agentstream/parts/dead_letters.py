"""The dead-letter part: a record that cannot be handled goes to `dlq` with the reason, counted.

Every failure is kept: a record that is not its topic's contract (the `Consumer` says why), a
record whose handler raised (the guard middleware, kafka/guard.py, or the `Consumer` itself), a
record a service refuses. `agentstream_dead_letters_total{service,topic,reason}` counts them by a
bounded class of the reason (metrics/dead_letters.py), every series at 0 from the start.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from faststream.message import StreamMessage
from prometheus_client import CollectorRegistry, Counter

from agentstream.contracts import DeadLetter
from agentstream.kafka.guard import failure_reason, records_of
from agentstream.kafka.topics import DLQ
from agentstream.metrics import DeadLetterReason, dead_letter_reason
from agentstream.metrics.lag import Subscription
from agentstream.publishing import Publisher


class DeadLetters:
    def __init__(self, publisher: Publisher, registry: CollectorRegistry, service: str, log: Any) -> None:
        self.service = service
        self.log = log
        self._publisher = publisher
        self.counter = Counter(
            "agentstream_dead_letters_total",
            "Records sent to the dlq, by the topic they came from and a class of the reason",
            ["service", "topic", "reason"],
            registry=registry,
        )

    def zero(self, subscriptions: Iterable[Subscription]) -> None:
        """Every (topic read, reason) series exists from the start at 0: a rate over a series that
        appears with its first dead letter misses that letter, and the alert would stay quiet."""
        for subscription in subscriptions:
            for topic in subscription.topics:
                for reason in DeadLetterReason:
                    self.counter.labels(self.service, topic, reason.value)

    async def record(self, raw: Any, error: str, value: bytes | None = None) -> None:
        """Send an aiokafka `ConsumerRecord` to `dlq` with the reason; never raises on bad bytes."""
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
            service=self.service,
        )
        await self._publisher.publish(DLQ, letter)
        self.count(letter.source_topic, error)
        self.log.warning("dead letter", **letter.coordinates(), error=error)

    def count(self, topic: str, error: str) -> None:
        self.counter.labels(self.service, topic, dead_letter_reason(error)).inc()

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
            await self.record(raw, reason)
        except Exception as dl_err:  # the broker is gone too: the log line is all that is left
            self.log.error("dead letter not published", **where, error=failure_reason(dl_err))
