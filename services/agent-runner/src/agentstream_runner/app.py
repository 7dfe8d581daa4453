"""agent-runner service: routes each record of `runs` + `tool-results` to its owner.

The handler never waits for a run: StartRun and ResumeRun go to the conversation's
owner, InterruptRun cancels its active run, AnswerApproval goes to the run waiting for
it (`approvals.py`), ResetConversation opens a new session and
stops the run, a ToolCallResult resolves the waiting call. Runs publish through the
`BrokerRunPorts` that `bootstrap` gave their launcher, never through the service. When
a partition moves to another runner, the runs of its conversations finish here first
(`handover.py`, up to `runner.handover_s`; what is left ends `failed(reason=rebalanced)`). Asked to stop, it drains: no new run starts here (a start is
left on `runs` for the next owner), the runs it has finish within `shutdown.grace_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Annotated, assert_never

from aiokafka import ConsumerRecord, TopicPartition
from prometheus_client import Gauge
from pydantic import Field, TypeAdapter, ValidationError

from agentstream.contracts import (
    AnswerApproval,
    FinishReason,
    InterruptRun,
    ResetConversation,
    ResumeRun,
    StartRun,
    ToolCallResult,
    utcnow,
)
from agentstream.contracts.tool_catalog import ToolCatalogEntryAdapter
from agentstream.kafka.commit_policies import AtMostOnce
from agentstream.kafka.consumer import Consumed, Consumer, Contract, NotTheContract, as_bytes
from agentstream.kafka.decoding import Undecodable, decode_record
from agentstream.kafka.topics import EVENTS
from agentstream.observability import NotReady
from agentstream.service import Runtime
from agentstream_runner.connectors.resolve import Connectors
from agentstream_runner.conversations.registry import Conversations
from agentstream_runner.handover import ResultsReader
from agentstream_runner.launcher import RunLauncher
from agentstream_runner.orphan_scan import read_committed_to_end, read_events
from agentstream_runner.orphans import (
    OpenRun,
    lost_ending,
    open_runs,
    orphaned,
    quiet_left,
    resumes_begun,
    runs_kept,
    still_silent,
    taken,
)
from agentstream_runner.ports import ToolWaiters
from agentstream_runner.tool_catalog import ToolCatalog

# Commands are handed to their owner at once, so their offsets are committed soon after
# reading (at most once): a runner killed right after would otherwise re-run a StartRun
# from scratch beside its resume. A run lost in that window is not lost for good:
# persistence's watchdog ends it and `resume.auto` rebuilds it from its `run.queued`.
COMMIT_INTERVAL_MS = 100

# The rebalance waits for the handover and then for this member's JoinGroup: a margin for the latter.
REJOIN_MARGIN_S = 10.0
POSITION_TIMEOUT_S = 2.0
# How long an assignment waits to end the runs orphaned there; past it they are left to
# persistence's watchdog (`resume.stale_after_s`).
ORPHAN_SCAN_S = 10.0

# What the one subscription (`runs` + `tool-results`) carries, told apart by `type`.
RunnerRecord = Annotated[
    StartRun | InterruptRun | ResumeRun | ResetConversation | AnswerApproval | ToolCallResult,
    Field(discriminator="type"),
]
RUNNER_RECORD: TypeAdapter[RunnerRecord] = TypeAdapter(RunnerRecord)
RUNNER_RECORD_NAME = "run command or tool result"


def runs_to_run(values: list[bytes]) -> tuple[set[str], set[str]]:
    """The runs that these `runs` records start, and those they resume."""
    starts: set[str] = set()
    resumes: set[str] = set()
    for value in values:
        try:
            record = RUNNER_RECORD.validate_json(value)
        except ValidationError:
            continue  # dead-lettered when the partition is read
        if isinstance(record, StartRun):
            starts.add(record.run_id)
        elif isinstance(record, ResumeRun):
            resumes.add(record.run_id)
    return starts, resumes


def arrived(start: StartRun, timestamp_ms: int | None, read_at: float) -> StartRun:
    """`start` with the runner's hops on its `Arrival`: the `runs` record's timestamp and when it was read."""
    assert start.arrival is not None
    produced_at = timestamp_ms / 1000 if isinstance(timestamp_ms, int) else None
    arrival = start.arrival.model_copy(update={"runs_produced_at": produced_at, "runner_read_at": read_at})
    return start.model_copy(update={"arrival": arrival})


class AgentRunnerService:
    name = "agent-runner"

    def __init__(
        self,
        runtime: Runtime,
        *,
        connectors: Connectors,
        launcher: RunLauncher,
        conversations: Conversations,
        waiters: ToolWaiters,
        tool_catalog: ToolCatalog,
    ) -> None:
        self.runtime = runtime  # its parts and their lifecycle (agentstream.service)
        self.infra = runtime.infra
        self.settings = runtime.settings
        self.topics = runtime.topics
        self.registry = runtime.registry
        self.log = runtime.log
        self.http = runtime.http
        self.connectors = connectors
        self.launcher = launcher
        self.conversations = conversations
        self.waiters = waiters
        self.tool_catalog = tool_catalog
        runtime.readiness.add("connectors", self._connectors_ready)
        self.decode_command = Contract(RUNNER_RECORD, RUNNER_RECORD_NAME)
        self._stopping = asyncio.Event()  # set by a drain: a scan's quiet wait ends with it
        self.orphans_ended = runtime.counter(
            "agentstream_runner_orphaned_runs_ended_total",
            "Runs found started and unfinished in newly assigned partitions, ended runner_lost at once",
        )
        self.records = runtime.counter("agentstream_runner_records_total", "Records consumed by type", ["type"])
        Gauge(
            "agentstream_runner_active_conversations", "Conversations with an active run", registry=self.registry
        ).set_function(lambda: len(self.conversations))
        # One consumer for both topics: they are co-partitioned, so a conversation's commands and
        # tool results reach the same runner, in order. At most once (see COMMIT_INTERVAL_MS).
        self.commands = runtime.consuming(
            Consumer(
                runtime.source,
                topic=(self.topics.runs, self.topics.tool_results),
                group=runtime.group_id,
                policy=AtMostOnce(),
                decode=self._decode,
                handler=self.on_record,
                # Before a partition moves, its runs finish here (`runner.handover_s`), so two runners
                # never write one conversation; the group waits that long for this member to rejoin.
                on_revoked=self.partitions_revoked,
                on_assigned=self.partitions_assigned,
                partitions_of=self.topics.runs,
                subscriber_options={
                    "auto_commit_interval_ms": COMMIT_INTERVAL_MS,
                    "rebalance_timeout_ms": int((self.settings.runner.handover_s + REJOIN_MARGIN_S) * 1000),
                },
            )
        )
        # Every runner needs the whole catalogue: no group (nothing shared, nothing committed),
        # read from the beginning on every start (docs/tools.md). Executors republish it every
        # few seconds: no message of anyone's.
        self.background_topics = frozenset({self.topics.tool_catalog})
        self.catalog_records = runtime.consuming(
            Consumer(
                runtime.source,
                topic=self.topics.tool_catalog,
                group=None,
                policy=AtMostOnce(),
                decode=as_bytes,  # a tombstone is no contract, and a bad entry is logged, not dead-lettered
                handler=self.on_catalog_record,
            )
        )

    async def _connectors_ready(self) -> bool:
        if not self.settings.connectors:  # every run would fail "connector not specified"
            raise NotReady("no connector configured (connectors: [])")
        return True

    async def start(self) -> None:
        await self.runtime.start(self.on_start, on_new_cluster=self.on_new_cluster, background=self.background_topics)

    async def drain(self, grace_s: float) -> None:
        self._stopping.set()
        await self.runtime.drain(grace_s, self.on_drain)

    async def on_start(self) -> None:
        if not self.settings.connectors:
            self.log.error("no connector configured: not ready, every run would fail", connectors=[])
        self.connectors.preload()  # before the broker starts: the first run does not wait for an import

    def _decode(self, raw: bytes) -> RunnerRecord:
        try:
            return self.decode_command(raw)
        except NotTheContract:
            self.records.labels("undecodable").inc()  # dead-lettered by the consumer
            raise

    async def on_record(self, consumed: Consumed[RunnerRecord]) -> None:
        read_at = time.time()
        record = consumed.record
        self.records.labels(record.type).inc()
        if (
            self.runtime.draining
            and isinstance(record, StartRun | ResumeRun)
            and self._leave_for_next_owner(consumed.source)
        ):
            return
        if isinstance(record, StartRun) and record.arrival is not None:
            record = arrived(record, consumed.timestamp_ms, read_at)
        with self.runtime.log_context(record):
            await self._route(record, consumed.partition)

    def _leave_for_next_owner(self, source: ConsumerRecord) -> bool:
        """While draining, a run that would start here is left on `runs`: the consumer goes back
        to it and that partition is paused, so the offset committed on the way out is this
        record's and the partition's next owner starts the run whole. False when it cannot be."""
        consumer = self.commands.consumer()
        if consumer is None:
            return False
        tp = TopicPartition(source.topic, source.partition)
        try:
            consumer.seek(tp, source.offset)
            consumer.pause(tp)
        except Exception as err:  # unassigned meanwhile: the record is its new owner's anyway
            self.log.info("start not left behind: partition gone", partition=source.partition, error=repr(err))
            return True
        self.log.info("draining: run left for the next owner", partition=source.partition, offset=source.offset)
        return True

    async def _route(self, record: RunnerRecord, partition: int) -> None:
        match record:
            case StartRun():
                self.infra.tracing.keep(record.run_id)  # the run starts later, in a task of its own
                self.conversations.submit(record, partition)
            case InterruptRun(conversation_key=key, run_id=run_id, reason=reason):
                if not self.conversations.interrupt(key, run_id, reason):
                    self.log.info("interrupt ignored: no matching active run", conversation=key, run_id=run_id)
            case ResumeRun():
                self.infra.tracing.keep(record.run_id)
                self.conversations.resume(record, partition)
            case AnswerApproval(conversation_key=key):
                if not self.launcher.approvals.deliver(record):
                    self.log.info("approval answer: no run waits for one", conversation=key)
                    await self.launcher.no_pending_approval(record)
            case ResetConversation(conversation_key=key):
                self.conversations.reset(key)
                session_id = await self.launcher.reset_session(key)
                self.log.info("conversation reset", conversation=key, session_id=session_id)
            case ToolCallResult():
                if not self.waiters.resolve(record):
                    self.log.info(
                        "tool result ignored: no run waits for it", run_id=record.run_id, call_id=record.call_id
                    )
            case _:
                assert_never(record)

    async def on_catalog_record(self, consumed: Consumed[bytes]) -> None:
        source = consumed.source
        if source.value is None:  # a tombstone: the tool is gone for every executor
            if isinstance(source.key, bytes):
                self.tool_catalog.forget(source.key.decode("utf-8", "replace"))
            return
        entry = decode_record(consumed.record, ToolCatalogEntryAdapter, "ToolCatalogEntry")
        if isinstance(entry, Undecodable):
            # Not dead-lettered: every runner reads the whole topic on every start, so each would
            # add the same dead letter again; the log says where it is.
            self.log.warning(
                "tool catalog record skipped",
                topic=source.topic,
                partition=source.partition,
                offset=source.offset,
                error=entry.reason,
            )
            return
        self.tool_catalog.apply(entry)

    # -- lifecycle -----------------------------------------------------------------
    async def partitions_revoked(self, partitions: set[int]) -> None:
        self.launcher.known_sessions.forget_all()  # their next owner may reset them
        if self.conversations.of_partitions(partitions):
            await self._hand_over(partitions)
        keys = await self.conversations.close_partitions(partitions, FinishReason.REBALANCED)
        if keys:
            self.log.warning("partitions revoked: runs stopped", partitions=sorted(partitions), conversations=keys)

    async def partitions_assigned(self, partitions: set[int]) -> None:
        """Runs of these partitions that started and never finished have no runner any more
        (orphans.py): each ends `failed(runner_lost)` now, before this runner reads the
        partitions, and `resume.auto` continues it from its checkpoint."""
        if not partitions:
            return
        client_id = f"{self.settings.kafka.client_id}-{self.name}-orphans"
        try:
            with self.launcher.taken_runs.scanning() as found:
                async with asyncio.timeout(ORPHAN_SCAN_S):
                    # `runs` before `events`: the ending a ResumeRun read there follows is in the events.
                    commands = await read_committed_to_end(
                        self.settings.kafka, self.topics.runs, partitions, self.runtime.group_id, client_id
                    )
                    events = await read_events(self.settings.kafka, self.topics.events, partitions, client_id)
                    starts, resumes = runs_to_run(commands)
                    # A StartRun read again whose run was taken up starts nothing, even if it reached
                    # its owner already, and a ResumeRun read again whose resume had begun continues
                    # only past it (docs/decisions.md § Orphaned runs). Not a run this runner still
                    # runs: after a restarted embedded broker the consumers join the new cluster while
                    # the runs of the old one go on here.
                    found.update(starts & taken(events))
                    started_here = {s.root_run_id for s in self.conversations.started_runs()}
                    begun = resumes_begun(events, resumes - started_here)
                    running = runs_kept(self.conversations.active_runs(), started_here, found, begun)
                    orphans = orphaned(events, [*(resumes - begun.keys()), *running])
                    for run_id, ended_at in begun.items():
                        self.launcher.taken_runs.resume_began(run_id, ended_at)
            now, heartbeat_s = utcnow(), self.settings.runner.heartbeat_s
            lately = [run for run in orphans if quiet_left(run, now, heartbeat_s) > 0]
            await self._end_orphans([run for run in orphans if quiet_left(run, now, heartbeat_s) == 0], partitions)
            if lately:
                await self._end_orphans(await self._still_silent(lately, partitions, client_id), partitions)
        except Exception as err:  # the watchdog still ends them, later
            self.log.warning("orphaned runs not looked for", partitions=sorted(partitions), error=repr(err))

    async def _still_silent(self, lately: list[OpenRun], partitions: set[int], client_id: str) -> list[OpenRun]:
        """Open runs written to lately may still have a runner (orphans.py): read again once they have
        been quiet long enough; those that wrote meanwhile, or ended, are left alone."""
        wait = max(quiet_left(run, utcnow(), self.settings.runner.heartbeat_s) for run in lately)
        self.log.info(
            "open runs written to lately: judged after a quiet time",
            runs=[r.root_run_id for r in lately],
            wait_s=round(wait, 1),
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), wait)
        if self._stopping.is_set():  # the partitions' next owner judges them: a stop does not wait on it
            self.log.info(
                "stopping: open runs written to lately left to the next owner", runs=[r.root_run_id for r in lately]
            )
            return []
        async with asyncio.timeout(ORPHAN_SCAN_S):
            events = await read_events(self.settings.kafka, self.topics.events, partitions, client_id)
        silent = still_silent(lately, open_runs(events))
        if alive := sorted({r.root_run_id for r in lately} - {r.root_run_id for r in silent}):
            self.log.warning("open runs of these partitions still run elsewhere: not ended", runs=alive)
        return silent

    async def _end_orphans(self, orphans: list[OpenRun], partitions: set[int]) -> None:
        for run in orphans:
            await self.runtime.publish(EVENTS, lost_ending(run))
        self.orphans_ended.inc(len(orphans))
        if orphans:
            self.log.warning(
                "runs of a lost runner ended", partitions=sorted(partitions), runs=[r.root_run_id for r in orphans]
            )

    async def _hand_over(self, partitions: set[int]) -> None:
        """The runs of `partitions` finish here, within `runner.handover_s`, before the partitions
        move (handover.py); their tool results and interrupts are read meanwhile on the side."""
        limit = self.settings.runner.handover_s
        if limit <= 0:
            return
        positions = await self._positions(partitions)
        self.log.info("partitions revoked: letting their runs finish", partitions=sorted(partitions), limit_s=limit)
        client_id = f"{self.settings.kafka.client_id}-{self.name}-handover"
        async with ResultsReader(self.settings.kafka, positions, self._route_handed, client_id):
            try:
                async with asyncio.timeout(limit):
                    await self.conversations.idle(partitions)
            except TimeoutError:
                self.log.warning("handover: runs still running when its time ran out", limit_s=limit)

    async def _positions(self, partitions: set[int]) -> dict[TopicPartition, int]:
        """Where the group's consumer is in those partitions of `runs` and `tool-results`."""
        consumer = self.commands.consumer()
        found: dict[TopicPartition, int] = {}
        if consumer is None:
            return found
        for topic in (self.topics.runs, self.topics.tool_results):
            for partition in partitions:
                tp = TopicPartition(topic, partition)
                try:
                    async with asyncio.timeout(POSITION_TIMEOUT_S):
                        found[tp] = await consumer.position(tp)
                except Exception as err:  # no position yet: nothing of it was read, nothing to hand
                    self.log.info("handover: no position", topic=topic, partition=partition, error=repr(err))
        return found

    def _route_handed(self, value: bytes) -> None:
        """What the finishing runs need from a revoked partition: their tool results and interrupts."""
        try:
            record = RUNNER_RECORD.validate_json(value)
        except ValidationError:
            return  # the partition's new owner dead-letters it
        match record:
            case ToolCallResult():
                self.waiters.resolve(record)
            case InterruptRun(conversation_key=key, run_id=run_id, reason=reason):
                self.conversations.interrupt(key, run_id, reason)
            case StartRun() | ResumeRun() | ResetConversation() | AnswerApproval():
                pass  # the new owner's: it reads them again from the committed offset
            case _:
                assert_never(record)

    async def on_new_cluster(self) -> None:
        # A restarted embedded broker lost the `run.started` of the runs going on here: delivery
        # needs it to show them (docs/decisions.md "Broker loss").
        await self.launcher.republish_started(self.conversations.started_runs())

    async def on_drain(self) -> None:
        await self.conversations.idle()

    async def stop(self) -> None:
        # Runs still there after the drain end (interrupted, reason "shutdown") while the broker can
        # still publish run.finished; with resume.auto they continue on another runner.
        active, waiting = self.conversations.runs()
        self.runtime.cut("runs", active)
        self.runtime.cut("queued_runs", waiting)
        await self.conversations.close(FinishReason.SHUTDOWN)
        await self.connectors.close()
        await self.runtime.stop()
