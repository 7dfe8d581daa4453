"""ingress service: carries out the pipeline's decisions for each batch of inbound records.

Records arrive in batches (one database round trip per batch for dedupe, not one per
record); each decision becomes an ordered list of records to publish. They are handed
to the producer in decision order without waiting for each ack (so a conversation's
records keep their order), and every ack is awaited before the handler returns: the
batch's offsets are only committed once all its output is in Kafka.
"""

from __future__ import annotations

import asyncio

from aiokafka import ConsumerRecord
from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter
from pydantic import BaseModel

from agentstream.contracts import DeadLetter, InboundMessage, Notice, ReplyTarget, conversation_key, new_id
from agentstream.db import upgrade
from agentstream.service import Service
from agentstream_ingress import http
from agentstream_ingress.decisions import (
    CommandDecision,
    DeadLetterDecision,
    Decision,
    DropDecision,
    NoticeDecision,
    StartDecision,
)
from agentstream_ingress.pipeline import Pipeline
from agentstream_ingress.store import DatabasePorts

MAX_BATCH = 500
BATCH_WAIT_MS = 10  # an idle consumer polls this often: the latency floor of a lone message

Outgoing = list[tuple[str, BaseModel]]  # (topic, record) in publishing order


class IngressService(Service):
    name = "ingress"
    uses_database = True

    def setup(self) -> None:
        self.decisions = Counter(
            "agentstream_ingress_decisions_total", "Inbound records by decision", ["decision", "reason"],
            registry=self.registry,
        )
        self.pipeline: Pipeline | None = None
        self.broker.subscriber(self.topics.inbound, batch=True, max_records=MAX_BATCH, batch_timeout_ms=BATCH_WAIT_MS,
                               **self.subscriber_options())(self.on_inbound)
        http.register(self.http, self.settings, self.produce_inbound)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        assert self.sessions is not None
        self.pipeline = Pipeline(self.settings, DatabasePorts(self.sessions, self.settings.authz.pairing))

    async def produce_inbound(self, msg: InboundMessage) -> None:
        """The HTTP front door writes to `inbound`, like any other producer."""
        if not self.started:
            raise RuntimeError("ingress is not connected to Kafka")
        await self.publish(self.topics.inbound, msg, msg.conversation_key)

    async def on_inbound(self, msg: KafkaMessage) -> None:
        assert self.pipeline is not None
        records: tuple[ConsumerRecord, ...] = msg.raw_message  # type: ignore[assignment]
        decisions = await self.pipeline.decide_batch([r.value or b"" for r in records])
        acks: list[asyncio.Future[object]] = []
        for record, decision in zip(records, decisions, strict=True):
            key, outgoing = self.carry_out(record, decision)
            for topic, out in outgoing:
                acks.append(await self.enqueue(topic, out, key))
        await asyncio.gather(*acks)

    async def enqueue(self, topic: str, record: BaseModel, key: str) -> asyncio.Future[object]:
        """Hand `record` to the producer; the returned future resolves on the broker's ack."""
        return await self.broker.publish(  # type: ignore[no-any-return]
            record.model_dump_json().encode(), topic, key=key.encode(), no_confirm=True,
            headers={"content-type": "application/json", "type": str(getattr(record, "type", ""))},
        )

    def carry_out(self, record: ConsumerRecord, decision: Decision) -> tuple[str, Outgoing]:
        """The records one decision publishes, and the key they go under."""
        match decision:
            case DeadLetterDecision(error=error, notify=target):
                key = record.key.decode("utf-8", "replace") if isinstance(record.key, bytes) else ""
                out: Outgoing = [(self.topics.dlq, self.letter(record, key, error))]
                if target is not None:
                    out.append(self.notice(target, f"Your message could not be processed: {error}", "error"))
                self.count("dead_letter", "invalid")
                self.log.warning("dead letter", offset=record.offset, error=error)
                return key, out
            case DropDecision(reason=reason):
                self.count("drop", reason)
                return "", []
            case NoticeDecision(reason=reason, text=text, target=target, level=level, command=name):
                self.count("notice", reason)
                return self.key_of(target), [self.notice(target, text, level, command=name)]
            case CommandDecision(commands=commands, target=target, notice=text, command=name):
                out = [(self.topics.runs, command) for command in commands]
                if text:
                    out.append(self.notice(target, text, command=name))
                self.count("command", commands[0].type if commands else "none")
                return self.key_of(target), out
            case StartDecision(start=start, queued=queued):
                self.count("start", "accepted")
                return start.conversation_key, [(self.topics.events, queued), (self.topics.runs, start)]
        raise TypeError(f"unknown decision {decision!r}")

    def letter(self, record: ConsumerRecord, key: str, error: str) -> DeadLetter:
        self.dead_letters.labels(self.name, record.topic).inc()
        return DeadLetter(source_topic=record.topic, source_partition=record.partition, source_offset=record.offset,
                          key=key or None, raw_value=(record.value or b"").decode("utf-8", "replace"), error=error,
                          service=self.name)

    def notice(
        self, target: ReplyTarget, text: str, level: str = "info", command: str | None = None
    ) -> tuple[str, BaseModel]:
        run_id = new_id()  # a notice outside any run gets a run id of its own
        return self.topics.events, Notice(
            run_id=run_id, root_run_id=run_id, conversation_key=self.key_of(target), seq=0,
            level=level, text=text, reply_target=target, command=command,  # type: ignore[arg-type]
        )

    @staticmethod
    def key_of(target: ReplyTarget) -> str:
        return conversation_key(target.platform, target.chat_id, target.thread_id)

    def count(self, decision: str, reason: str) -> None:
        self.decisions.labels(decision, str(reason)).inc()
