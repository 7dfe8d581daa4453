"""ingress service: carries out the pipeline's decisions for each batch of inbound records.

Records arrive in batches (one database round trip per batch for dedupe, not one per
record); each decision becomes an ordered list of records to publish. A batch's output
goes to the producer as one record batch per topic-partition, in decision order (so a
conversation's records keep their order). The handler does not wait for the acks: the
next batch is decided meanwhile, and a batch's offsets are only committed once all its
output is in Kafka; a batch whose output fails (or that could not be decided) is read
again and decided as if never seen (agentstream.kafka.batch_commits, `IngressStore.first_sightings`).
The collaborators (pipeline, database ports, retention) are built by bootstrap.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, assert_never

from aiokafka import ConsumerRecord

from agentstream.contracts import Arrival, DeadLetter, InboundMessage, Notice, NoticeLevel, ReplyTarget, new_id
from agentstream.contracts.inbound import DedupeKey
from agentstream.db import upgrade
from agentstream.kafka.commit_policies import AfterOutputAcked
from agentstream.kafka.consumer import BatchConsumer, Consumed, OutputAcks, Polling
from agentstream.kafka.internals import producer_of
from agentstream.kafka.producer import encode_record
from agentstream.kafka.topics import DLQ, EVENTS, INBOUND, RUNS, TOPICS, Addressed, addressed
from agentstream.retention import RetentionTask
from agentstream.service import Runtime
from agentstream_ingress import http
from agentstream_ingress.batch_output import BatchOutput
from agentstream_ingress.decisions import (
    CommandDecision,
    DeadLetterDecision,
    Decision,
    DropDecision,
    NoticeDecision,
    StartDecision,
)
from agentstream_ingress.outbox import Outbox, position_of, resent_header
from agentstream_ingress.pipeline import Pipeline
from agentstream_ingress.starting import Position, notice_id
from agentstream_ingress.store import DatabasePorts

MAX_BATCH = 500
BATCH_WAIT_MS = 10  # an idle consumer polls this often: the latency floor of a lone message

DECIDE_RETRY_S = 1.0  # a batch that could not be decided is read again after this pause

Outgoing = list[Addressed]  # in publishing order


def _failed(err: Exception) -> asyncio.Future[None]:
    """An ack that already failed: the batch goes the way of one whose output was not acked."""
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    failed.set_exception(err)
    return failed


def debug_enabled(log: Any) -> bool:
    """Whether `log` lets a debug line through: a stdlib-backed logger (`configure_logging`)
    asks its level, structlog's own (not configured, as in tests) its filter."""
    check = getattr(log, "isEnabledFor", None) or getattr(log, "is_enabled_for", None)
    return bool(check(logging.DEBUG)) if check is not None else True


def log_fields(record: ConsumerRecord, decision: Decision) -> dict[str, str | None]:
    """The run and conversation a decision's log lines name: the key is the conversation; an
    accepted message's run id is derived here, so ingress's lines carry it too."""
    key = record.key.decode("utf-8", "replace") if isinstance(record.key, bytes) else None
    if isinstance(decision, StartDecision):
        return {"run_id": decision.start.run_id, "conversation_key": decision.start.conversation_key}
    return {"conversation_key": key}


def started_and_not(
    records: Sequence[ConsumerRecord], decisions: Sequence[Decision], claims: Sequence[DedupeKey]
) -> tuple[list[tuple[DedupeKey, Position, str]], set[DedupeKey]]:
    """A batch's first sightings split: (key, first position, run id) of the runs it started,
    and the keys decided as no run (a notice, a command, a dead letter)."""
    started = [
        (d.message.dedupe_key, position_of(r), d.start.run_id)
        for r, d in zip(records, decisions, strict=True)
        if isinstance(d, StartDecision)
    ]
    return started, set(claims) - {key for key, _, _ in started}


class IngressService:
    name = "ingress"

    def __init__(self, runtime: Runtime, pipeline: Pipeline, ports: DatabasePorts, retention: RetentionTask) -> None:
        self.runtime = runtime  # its parts and their lifecycle (agentstream.service)
        self.infra = runtime.infra
        self.settings = runtime.settings
        self.topics = runtime.topics
        self.registry = runtime.registry
        self.log = runtime.log
        self.http = runtime.http
        self.broker = runtime.broker
        self.sessions = runtime.infra.sessions
        self.pipeline = pipeline
        self.ports = ports
        self.retention = retention
        self.decisions = runtime.counter(
            "agentstream_ingress_decisions_total", "Inbound records by decision", ["decision", "reason"]
        )
        self._decision_counters: dict[tuple[str, str], Any] = {}
        self._tally: dict[tuple[str, str], int] = {}  # this batch's decisions, counted at its end
        self._topic_names = {topic: self.topics.name(topic) for topic in TOPICS}
        self._debug = False  # the log level lets debug lines through (read per batch)
        # A batch's offsets once its output is acked; a batch whose output failed is read again.
        self.inbound = runtime.consuming(
            BatchConsumer(
                runtime.source,
                topic=self.topics.inbound,
                group=runtime.group_id,
                policy=AfterOutputAcked(),
                handler=self.on_inbound,
                polling=Polling(max_records=MAX_BATCH, wait_ms=BATCH_WAIT_MS),
            )
        )
        # Only a broker that forgets acked records on a restart needs them kept here (outbox.py).
        self.outbox = Outbox(self.sessions) if self.settings.kafka.in_memory and self.sessions else None
        self._sweeper: asyncio.Task[None] | None = None
        http.register(self.http, self.settings, self.produce_inbound)

    async def start(self) -> None:
        await self.runtime.start(self.on_start, on_new_cluster=self.on_new_cluster)

    async def drain(self, grace_s: float) -> None:
        await self.runtime.drain(grace_s)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        self.retention.start(self.sessions)
        if self.outbox is not None:
            self._sweeper = asyncio.create_task(self._sweep_outbox(self.outbox), name="ingress-outbox-sweep")

    async def on_stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.wait({self._sweeper})
        await self.retention.stop()

    async def _sweep_outbox(self, outbox: Outbox) -> None:
        while True:
            await asyncio.sleep(max(0.0, outbox.next_sweep - time.monotonic()))
            try:
                await outbox.sweep()
            except Exception as err:  # the database away: the next sweep catches up
                self.log.warning("outbox sweep failed", error=repr(err))
                outbox.next_sweep = time.monotonic() + DECIDE_RETRY_S * 10

    async def on_new_cluster(self) -> None:
        """The broker restarted without its records: send again what the front door accepted and
        is not done (outbox.py); the front door keeps refusing until this returns."""
        if self.outbox is None:
            return
        unfinished = await self.outbox.unfinished()
        producer = producer_of(self.broker)
        acks = []
        for item in unfinished:
            raw_key, value, headers = encode_record(item.message, item.message.conversation_key)
            if item.first is not None:
                headers = [*headers, resent_header(item.first)]
            acks.append(await producer.send(self.topics.inbound, value, key=raw_key, headers=headers))
        await asyncio.gather(*acks)
        if unfinished:
            self.log.warning(
                "accepted messages the restarted broker lost: sent again",
                count=len(unfinished),
                started=sum(item.first is not None for item in unfinished),
            )

    async def produce_inbound(self, msg: InboundMessage) -> None:
        """The HTTP front door writes to `inbound`, like any other producer."""
        if not self.runtime.started:
            raise RuntimeError("ingress is not connected to Kafka")
        self.runtime.broker_health.raise_if_down()  # a restarted broker without topics would swallow it
        if self.outbox is not None:
            await self.outbox.accepting(msg)
        await self.runtime.publish(INBOUND, msg)

    async def on_inbound(self, batch: list[Consumed[bytes]]) -> OutputAcks:
        """Decide a batch and hand its output to the producer; its offsets wait for the acks."""
        read_at = time.time()  # the batch's arrival, carried on each run it starts (`Arrival`)
        self._debug = debug_enabled(self.log)
        ports = self.ports
        try:
            decisions = await self.pipeline.decide_batch(
                [c.record for c in batch],
                [position_of(c.source) for c in batch],
                [Arrival(produced_at=c.source.timestamp / 1000, ingress_read_at=read_at) for c in batch],
            )
        except Exception as err:  # the database away: not a record's fault, so the batch is read again
            ports.release_sightings(ports.take_claims())
            self.log.error("batch not decided: read again shortly", records=len(batch), error=repr(err))
            await asyncio.sleep(DECIDE_RETRY_S)
            return OutputAcks([_failed(err)])
        claims = ports.take_claims()  # this batch's first sightings: seen once its output is acked
        try:
            output = BatchOutput()
            tracing = self.infra.tracing
            try:
                for consumed, decision in zip(batch, decisions, strict=True):
                    record = consumed.source
                    if not tracing.enabled:  # no span: a context manager less per record
                        self.add_output(output, record, decision)
                        continue
                    # Each message its own trace (the batch's span is only linked): a run's trace
                    # starts here, and the records written for it carry it on.
                    with tracing.consuming(record, "inbound decide") as span:
                        span.set_attribute("agentstream.decision", type(decision).__name__)
                        self.add_output(output, record, decision)
            finally:
                self.count_batch()
            acks = await output.send(producer_of(self.broker))
        except Exception as err:  # e.g. no metadata from a broker that is away: the batch is read again
            return OutputAcks([_failed(err)], undo=lambda: ports.release_sightings(claims))

        # Not awaited here: the next batch is decided while this one's output is on its way
        # (the producer keeps the order per partition); its offsets wait for the acks.
        async def after() -> None:
            if self.outbox is not None:  # before the sightings: a kill between them re-sends, never loses
                await self.outbox.decided(*started_and_not([c.source for c in batch], decisions, claims))
            await ports.record_sightings(claims)

        return OutputAcks(acks, after=after, undo=lambda: ports.release_sightings(claims))

    async def stop(self) -> None:
        await self.runtime.final_step(self.inbound.flush(), "final offset commit")  # before the consumer closes
        await self.pipeline.settle()  # before the database closes
        await self.runtime.stop(self.on_stop)

    def add_output(self, output: BatchOutput, record: ConsumerRecord, decision: Decision) -> None:
        """What `decision` publishes, added to the batch's output. `carry_out` runs inside the
        record's log context only when it writes a log line (a dead letter; a start at debug):
        binding and resetting the context was ~4 µs of a record's few dozen."""
        if isinstance(decision, DeadLetterDecision) or (self._debug and isinstance(decision, StartDecision)):
            with self.runtime.log_context(**log_fields(record, decision)):
                key, outgoing = self.carry_out(record, decision)
        else:
            key, outgoing = self.carry_out(record, decision)
        for out in outgoing:
            output.add(self._topic_names[out.topic], out.record, key)

    def carry_out(self, record: ConsumerRecord, decision: Decision) -> tuple[str, Outgoing]:
        """The records one decision publishes, and the key they go under (a started run carries
        its `Arrival` from the pipeline: `on_inbound` hands it each record's)."""
        match decision:
            case DeadLetterDecision(error=error, notify=target):
                key = record.key.decode("utf-8", "replace") if isinstance(record.key, bytes) else ""
                out: Outgoing = [addressed(DLQ, self.letter(record, key, error))]
                if target is not None:
                    text = self.settings.ingress.texts_for(target.platform).fill("invalid_message", error=error)
                    out.append(self.notice(record, target, text, NoticeLevel.ERROR))
                self.count("dead_letter", "invalid")
                self.log.warning(
                    "dead letter", topic=record.topic, partition=record.partition, offset=record.offset, error=error
                )
                return key, out
            case DropDecision(reason=reason):
                self.count("drop", reason)
                return "", []
            case NoticeDecision(reason=reason, text=text, target=target, level=level, command=name):
                self.count("notice", reason)
                return self.key_of(target), [self.notice(record, target, text, level, command=name)]
            case CommandDecision(commands=commands, target=target, notice=text, command=name):
                out = [addressed(RUNS, command) for command in commands]
                if text:
                    out.append(self.notice(record, target, text, command=name))
                self.count("command", commands[0].type if commands else "none")
                return self.key_of(target), out
            case StartDecision(start=start, queued=queued):
                self.count("start", "accepted")
                # A run's first line, at debug (checked once per batch: even a line below the
                # level costs a few microseconds, ingress's CPU per record is a few dozen).
                if self._debug:
                    self.log.debug("run accepted", assistant_id=start.assistant_id)
                return start.conversation_key, [addressed(EVENTS, queued), addressed(RUNS, start)]
            case _:
                assert_never(decision)

    def letter(self, record: ConsumerRecord, key: str, error: str) -> DeadLetter:
        self.runtime.count_dead_letter(record.topic, error)
        return DeadLetter(
            source_topic=record.topic,
            source_partition=record.partition,
            source_offset=record.offset,
            key=key or None,
            raw_value=(record.value or b"").decode("utf-8", "replace"),
            error=error,
            service=self.name,
        )

    def notice(
        self,
        record: ConsumerRecord,
        target: ReplyTarget,
        text: str,
        level: NoticeLevel = NoticeLevel.INFO,
        command: str | None = None,
    ) -> Addressed:
        """A notice outside any run (a run id of its own). Its record id is the inbound record's:
        a batch read again after a crash (docs/decisions.md) repeats it, and delivery's ledger,
        which keeps notices by id, shows it once."""
        run_id = new_id()
        notice = Notice(
            id=notice_id((record.partition, record.offset), record.timestamp),
            run_id=run_id,
            root_run_id=run_id,
            conversation_key=self.key_of(target),
            seq=0,
            level=level,
            text=text,
            reply_target=target,
            command=command,
        )
        return addressed(EVENTS, notice)

    @staticmethod
    def key_of(target: ReplyTarget) -> str:
        return target.conversation_key

    def count(self, decision: str, reason: str) -> None:
        """One more record decided so; added to the counter once per batch (`count_batch`)."""
        key = (decision, str(reason))
        self._tally[key] = self._tally.get(key, 0) + 1

    def count_batch(self) -> None:
        tally, self._tally = self._tally, {}
        for key, n in tally.items():
            child = self._decision_counters.get(key)
            if child is None:  # `labels()` validates and locks on every call: keep the children
                child = self._decision_counters[key] = self.decisions.labels(*key)
            child.inc(n)
