"""delivery service: routes run events to one stream per (root run, target).

The handler stays thin: decode, pick the stream, hand it an input. Decisions live in
`stream_machine` (pure), platform calls in `stream_actor`, `deliverer` and the adapters.
Every collaborator is built by `bootstrap` and passed in.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from prometheus_client import Gauge

from agentstream.auth import WebSessions
from agentstream.bounded import BoundedMap
from agentstream.contracts import (
    DeliveryReceipt,
    KnownPlatform,
    Notice,
    ReplyTarget,
    RunEvent,
    RunEventAdapter,
    RunFinished,
    RunProgressEvent,
    RunQueued,
    RunStarted,
    RunStatus,
    conversation_key,
)
from agentstream.db import upgrade
from agentstream.kafka.commit_policies import AtMostOnce, OldestOpen
from agentstream.kafka.commits import COMMIT_TIMEOUT_S
from agentstream.kafka.consumer import Consumed, Consumer, Contract, as_bytes
from agentstream.kafka.topics import DELIVERIES, INBOUND, WEB_FRAMES
from agentstream.retention import RetentionTask
from agentstream.service import Runtime
from agentstream_delivery.adapters import PlatformAdapter
from agentstream_delivery.adapters.web_history import ConversationHistory
from agentstream_delivery.adapters.web_http import add_web_routes
from agentstream_delivery.api import add_routes
from agentstream_delivery.current_runs import MAX_REMEMBERED, CurrentRuns, first_segment
from agentstream_delivery.deliverer import DEFAULT_LATE_LANDING_S, deliver_notice
from agentstream_delivery.delivery_metrics import DeliveryMetrics
from agentstream_delivery.hooks import HookRuntime, TransformContext
from agentstream_delivery.ledger import Ledger, ReceiptQueue
from agentstream_delivery.platforms import Adapters, late_landing
from agentstream_delivery.ratelimit import ChatGate, RateLimiter
from agentstream_delivery.relay import Relay
from agentstream_delivery.stream_actor import StreamActor, StreamKey, StreamRegistry
from agentstream_delivery.stream_inputs import Finish, finish_input, stream_input
from agentstream_delivery.web_reader import WebFramesReader

FinishedListener = Callable[[RunFinished], Awaitable[None] | None]
COMMIT_EVERY_S = 0.5
RECEIPTS_ON_STOP_S = 5.0  # a stop waits this long for the receipts queued to be published
# Streams of runs that ended short of their answer, kept for a resume to re-mark; the oldest go first.
ENDED_KEPT = 1_000
# The group waits for this member's rejoin the hand-over wait, the commit after it and this margin.
REJOIN_MARGIN_S = 10.0


class DeliveryService:
    name = "delivery"

    def __init__(
        self,
        runtime: Runtime,
        *,
        adapters: Adapters,
        rate_limiter: RateLimiter,
        ledger: Ledger,
        receipts: ReceiptQueue,
        current_runs: CurrentRuns,
        hooks: HookRuntime,
        relay: Relay,
        retention: RetentionTask,
        web_sessions: WebSessions,
    ) -> None:
        self.runtime = runtime  # its parts and their lifecycle (agentstream.service)
        self.infra = runtime.infra
        self.settings = runtime.settings
        self.topics = runtime.topics
        self.registry = runtime.registry
        self.log = runtime.log
        self.http = runtime.http
        self.sessions = runtime.infra.sessions
        self.memory = adapters.memory
        self.web = adapters.web
        self.adapters = adapters.enabled
        self.rate_limiter = rate_limiter
        self.ledger = ledger
        self.receipts = receipts
        self.current_runs = current_runs
        self.hooks = hooks
        self.relay = relay
        self.retention = retention
        self.web_sessions = web_sessions
        self.streams = StreamRegistry()
        self._ended: OrderedDict[str, list[StreamActor]] = OrderedDict()  # root run id → its closed streams
        self._replays: set[str] = set()  # open streams that re-project a stored run (`run.started.replay_of`)
        self.finished_listeners: list[FinishedListener] = []
        self._warned_platforms: set[str] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._receipts_task: asyncio.Task[None] | None = None
        self._held: dict[asyncio.Task[Any], tuple[int, int]] = {}  # stream and notice tasks → their first record
        self._partition_of: BoundedMap[str, int] = BoundedMap(MAX_REMEMBERED)  # conversation → its `events` partition
        self._revoked: set[int] = set()  # revoked and not assigned again: a record read before is dropped
        # A revocation waits this long for the platform requests in flight of the streams it hands
        # over: the longest late-landing window, past every adapter's request timeout (docs/delivery.md § Rebalance).
        self.handover_wait_s = max(
            [late_landing(a, self.settings.platforms.get(a.platform)) for a in self.adapters.values()],
            default=DEFAULT_LATE_LANDING_S,
        )
        self.metrics = DeliveryMetrics(self.registry, self.adapters)
        open_streams = Gauge("agentstream_delivery_open_streams", "Streams being delivered", registry=self.registry)
        open_streams.set_function(lambda: len(self.streams.all()))
        self._subscribe()
        add_routes(self.http, self.streams, self.memory)
        self.web_reader: WebFramesReader | None = None
        if KnownPlatform.WEB in self.adapters:
            self._add_web_routes()

    def _subscribe(self) -> None:
        # Never past an unfinished stream: each stream and notice holds its first record until done (docs/delivery.md).
        self.events = self.runtime.consuming(
            Consumer(
                self.runtime.source,
                topic=self.topics.events,
                group=self.runtime.group_id,
                policy=OldestOpen(every_s=COMMIT_EVERY_S),
                decode=Contract(RunEventAdapter, "RunEvent"),
                handler=self.on_event,
                on_revoked=self.partitions_revoked,
                on_assigned=self.partitions_assigned,
                subscriber_options={
                    "rebalance_timeout_ms": int((self.handover_wait_s + COMMIT_TIMEOUT_S + REJOIN_MARGIN_S) * 1000)
                },
            )
        )
        if self.hooks.observing:
            # Observers get their own consumer group: they read the same records at their own
            # pace, so a slow hook lags only itself and never holds back a stream.
            self.hook_records = self.runtime.consuming(
                Consumer(
                    self.runtime.source,
                    topic=(self.topics.events, self.topics.deliveries),
                    group=f"{self.runtime.group_id}-hooks",
                    policy=AtMostOnce(),
                    decode=as_bytes,
                    handler=self.on_hook_record,
                )
            )

    def _add_web_routes(self) -> None:
        if self.web_sessions.ephemeral:
            self.log.warning(
                "auth.web.secret_env is not set (or its env var is empty): web chat sessions are signed "
                "with a random per-process secret; they do not survive a restart or span replicas",
                secret_env=self.settings.auth.web.secret_env,
            )
        web_conf = self.settings.platforms.get(KnownPlatform.WEB)
        add_web_routes(
            self.http,
            self.web,
            self.web_sessions,
            self._ingress_url(),
            web_conf.api_key_env if web_conf is not None else None,
            ConversationHistory(
                self._local_url(web_conf.history_url if web_conf else None, self.settings.http.persistence),
                web_conf.history_key_env if web_conf is not None else None,
                texts=self.web.capabilities.texts,
            ),
        )
        # Frames go out on `web-frames`; every replica's reader serves its own pages from there.
        self.web.sink = lambda frame: self.runtime.publish(WEB_FRAMES, frame)
        self.web_reader = WebFramesReader(
            self.settings.kafka, self.topics.web_frames, self.web, self.runtime.dead_letter_record, self.log
        )

    async def start(self) -> None:
        await self.runtime.start(self.on_start)

    async def drain(self, grace_s: float) -> None:
        await self.runtime.drain(grace_s, self.on_drain)

    async def stop(self) -> None:
        await self._publish_receipts_left()
        await self.runtime.stop(self.on_stop)

    async def _publish_receipts_left(self) -> None:
        """The receipts queued so far go out while the producer still runs (bounded), and no wave is
        started after: the producer stops next, and a receipt handed to it then only fails."""
        try:
            async with asyncio.timeout(RECEIPTS_ON_STOP_S):
                await self.receipts.published()
        except TimeoutError:
            pass  # counted below, with those the streams still record until they are cut
        if self._receipts_task is not None:
            self._receipts_task.cancel()
            await asyncio.gather(self._receipts_task, return_exceptions=True)

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        self._receipts_task = self._spawn(self.receipts.drain(self._publish_receipt, self.log))
        self.hooks.start()
        if self.web_reader is not None:
            self._spawn(self.web_reader.run())
        if self.sessions is not None:
            self.retention.start(self.sessions)

    async def on_drain(self) -> None:
        """The streams open when the stop was asked finish here: their events keep coming on the
        partitions this process still reads. Streams opened since are not waited for: cut by the
        stop, their offsets are still held, and the partition's next owner reads them again
        (docs/deploy.md § Stopping)."""
        await asyncio.gather(*(actor.wait_closed() for actor in self.streams.all()), return_exceptions=True)

    async def on_stop(self) -> None:
        await self.retention.stop()
        self.runtime.cut("streams", len(self.streams.all()))
        await self.streams.cancel_all()
        await self.hooks.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for adapter in self.adapters.values():
            await adapter.close()
        if left := self.receipts.pending():  # the ledger rows have them; `deliveries` does not
            self.log.warning("delivery receipts not published: the service stopped", receipts=left)

    # -- the handler -----------------------------------------------------------------
    async def on_event(self, consumed: Consumed[RunEvent]) -> None:
        origin = (consumed.partition, consumed.offset)
        if origin[0] in self._revoked:
            return  # its partition moved on meanwhile: the new owner reads it again (docs/delivery.md § Rebalance)
        event = consumed.record
        self._partition_of.set(event.conversation_key, origin[0])
        with self.runtime.log_context(event):  # streams opened here keep the run's ids
            await self.handle(event, origin)

    async def on_hook_record(self, consumed: Consumed[bytes]) -> None:
        await self.hooks.on_record(consumed.record)

    async def handle(self, event: RunEvent, origin: tuple[int, int] | None = None) -> None:
        resumed = isinstance(event, RunStarted) and self.current_runs.resumes(event.root_run_id, event.seq)
        if not isinstance(event, Notice) and self.current_runs.is_over(event.root_run_id) and not resumed:
            self.log.debug("event of a run no longer current dropped", type=event.type, root_run_id=event.root_run_id)
            return
        match event:
            case Notice():
                await self._deliver_notice(event, origin)
            case RunQueued():
                self.relay.note_queued(event)
            case RunStarted():
                self._open(event, origin)
            case RunFinished():
                self._finish(event)
            case _:
                # Exhaustive all the same: mypy checks that every event type left is a `RunProgressEvent`,
                # so a new event type is named here until it is handled above or fed to the streams.
                self._feed(event)

    def _feed(self, event: RunProgressEvent) -> None:
        inp = stream_input(event)
        if inp is None:
            return
        actors = self.streams.of(event.root_run_id)
        if not actors:
            self.log.debug("event without stream ignored", type=event.type, root_run_id=event.root_run_id)
        for actor in actors:
            actor.feed(inp)

    # -- stream lifecycle --------------------------------------------------------------
    def _open(self, event: RunStarted, origin: tuple[int, int] | None = None) -> None:
        if event.run_id != event.root_run_id:
            return  # only the root run owns the stream
        if event.replay_of is not None:  # beside the chat's own runs, never superseding them; not relayed
            self._replays.add(event.root_run_id)
            before = {a.key: a for a in self._ended.pop(event.root_run_id, [])}
            key = StreamKey.of(event.root_run_id, event.reply_target)
            self._open_target(event, event.reply_target, origin, before.get(key))
            return
        superseded = self.current_runs.start(event.conversation_key, event.root_run_id, event.seq)
        if superseded is not None:  # a newer run took the conversation: the old stream ends here
            self.log.info("stream superseded by a newer run", root_run_id=superseded, by=event.root_run_id)
            for actor in self.streams.pop(superseded):
                actor.feed(Finish(RunStatus.INTERRUPTED))
        # A resumed run: the streams of its first attempt, whose ending messages it re-marks.
        before = {a.key: a for a in self._ended.pop(event.root_run_id, [])}
        # Relay mirrors are more targets of the same run: same consumer, same state machine.
        for target in (event.reply_target, *self.relay.mirrors(event.reply_target)):
            self._open_target(event, target, origin, before.get(StreamKey.of(event.root_run_id, target)))

    def _open_target(
        self,
        event: RunStarted,
        target: ReplyTarget,
        origin: tuple[int, int] | None = None,
        predecessor: StreamActor | None = None,
    ) -> None:
        adapter = self._adapter(target.platform)
        if adapter is None:
            return
        actor = StreamActor(
            StreamKey.of(event.root_run_id, target),
            target,
            adapter,
            self.log,
            observe=self.metrics,
            outgoing=None if self.hooks.transform.empty else self.hooks.transform,
            ledger=self.ledger,
            conversation_key=event.conversation_key,
            origin=origin,
            gate=self._gate(adapter, target),
            first_segment=first_segment(event),
            late_landing_s=late_landing(adapter, self.settings.platforms.get(adapter.platform)),
            predecessor=predecessor,
        )
        if not self.streams.add(actor):
            self.log.info("run.started for an open stream ignored", root_run_id=event.root_run_id)
            return
        if origin is not None and actor.task is not None:
            self._hold_until_done(actor.task, origin)

    def _finish(self, event: RunFinished) -> None:
        self.current_runs.end(event.root_run_id, event.seq, event.conversation_key)
        actors = self.streams.pop(event.root_run_id)
        for actor in actors:
            actor.feed(finish_input(event))
        if actors and event.status is not RunStatus.COMPLETED:
            self._ended[event.root_run_id] = actors
            while len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
        replay = event.root_run_id in self._replays
        self._replays.discard(event.root_run_id)
        if actors and not replay:
            self._spawn(self._forward(actors[0].target, event))
        task = asyncio.create_task(self._after_finish(actors, event))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_finish(self, actors: list[StreamActor], event: RunFinished) -> None:
        """Listeners hear of the run once every target has its final text.

        They are told even when no stream was open (platform without adapter, run
        started before this process): whoever waits for the run must not hang.
        """
        # Under run.finished's span (this task started in its handler): until every target has it.
        with self.infra.tracing.span("deliver final", {"agentstream.root_run_id": event.root_run_id}) as span:
            span.set_attribute("agentstream.targets", len(actors))
            await asyncio.gather(*(a.wait_closed() for a in actors), return_exceptions=True)
        if any(a.task is not None and a.task.cancelled() for a in actors):
            return  # handed over (or stopped) short of its final text: the next owner tells its own listeners
        for listener in list(self.finished_listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # one broken listener must not hide the run from the others
                self.log.exception("finished listener failed", root_run_id=event.root_run_id)

    async def _forward(self, source: ReplyTarget, event: RunFinished) -> None:
        """Relay forwards: the finished answer becomes an inbound message for another profile."""
        for message in self.relay.forwards(source, event):
            key = conversation_key(message.platform, message.chat_id, message.thread_id)
            try:
                await self.runtime.publish(INBOUND, message, key)
                self.log.info("run forwarded", root_run_id=event.root_run_id, to=key, profile=message.profile)
            except Exception as err:
                self.log.warning("relay forward failed", root_run_id=event.root_run_id, to=key, error=repr(err))

    async def _deliver_notice(self, event: Notice, origin: tuple[int, int] | None = None) -> None:
        target = event.reply_target or self._target_of(event.root_run_id)
        if target is None:
            self.log.info("notice without reply target dropped", root_run_id=event.root_run_id)
            return
        adapter = self._adapter(target.platform)
        if adapter is None:
            return
        text = await self.hooks.transform(
            event.text, TransformContext(target.platform, target.chat_id, event.root_run_id, 0, final=True)
        )
        # Its own task: a notice waits for the chat's slot (a 429 may last long) without
        # holding up the consumer; the commit stays held at it until the ledger has its outcome.
        task = asyncio.create_task(
            deliver_notice(
                event,
                target,
                text,
                adapter,
                self._gate(adapter, target),
                self.ledger,
                self.log,
                self.metrics,
                late_landing_s=late_landing(adapter, self.settings.platforms.get(adapter.platform)),
            )
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if origin is not None:
            self._hold_until_done(task, origin)

    def _hold_until_done(self, task: asyncio.Task[Any], origin: tuple[int, int]) -> None:
        """No commit past `origin` until the task is done. A task cancelled by a shutdown is
        unfinished: its hold stays, and the next start reads its records again."""
        points = self.events.points
        assert points is not None
        points.hold(*origin)
        self._held[task] = origin
        task.add_done_callback(lambda t: self._held.pop(t, None))
        task.add_done_callback(lambda t: None if t.cancelled() else points.release(*origin))

    # -- rebalance -------------------------------------------------------------------
    async def partitions_revoked(self, partitions: set[int]) -> None:
        """The streams and notices of revoked `events` partitions stop before their next platform
        call (one in flight ends and is recorded first) and are forgotten here; their offsets stay
        held, so the commit made now leaves their records to the new owner, which reads them again
        and carries on from the ledger: one writer per message (docs/delivery.md § Rebalance)."""
        self._revoked |= partitions
        moving = [task for task, (partition, _) in self._held.items() if partition in partitions]
        for task in moving:
            task.cancel()
        if moving and (late := (await asyncio.wait(moving, timeout=self.handover_wait_s))[1]):
            self.log.warning("platform calls still in flight after the hand-over wait", tasks=len(late))
        moved = self.streams.drop(lambda actor: actor.origin is not None and actor.origin[0] in partitions)
        for actor in moved:
            self._replays.discard(actor.key.root_run_id)
        for root_run_id, actors in list(self._ended.items()):
            if any(a.origin is not None and a.origin[0] in partitions for a in actors):
                del self._ended[root_run_id]
        conversations = {key for key in self._partition_of if self._partition_of.peek(key) in partitions}
        self.current_runs.forget(conversations)
        for key in conversations:
            self._partition_of.pop(key)
        await self.events.flush()
        self.events.forget(partitions)
        if moving:
            self.log.info("streams handed over", partitions=sorted(partitions), streams=len(moved), tasks=len(moving))

    async def partitions_assigned(self, partitions: set[int]) -> None:
        self._revoked -= partitions

    # -- platforms -----------------------------------------------------------------
    def _gate(self, adapter: PlatformAdapter, target: ReplyTarget) -> ChatGate:
        return self.rate_limiter.gate(target.platform, adapter.bot, target.chat_id, adapter.capabilities.chat_interval)

    def _adapter(self, platform: str) -> PlatformAdapter | None:
        adapter = self.adapters.get(platform)
        if adapter is None and platform not in self._warned_platforms:
            self._warned_platforms.add(platform)
            self.log.warning("no adapter for platform; its messages are dropped", platform=platform)
        return adapter

    def _ingress_url(self) -> str:
        """Where the web page's messages go: `platforms.web.api_url`, else this host's ingress."""
        conf = self.settings.platforms.get(KnownPlatform.WEB)
        return self._local_url(conf.api_url if conf is not None else None, self.settings.http.ingress)

    def _local_url(self, configured: str | None, port: int) -> str:
        """`configured`, else the service on `port` of this host."""
        if configured:
            return configured
        host = self.settings.http.host
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"

    def _target_of(self, root_run_id: str) -> ReplyTarget | None:
        actors = self.streams.of(root_run_id)
        return actors[0].target if actors else None

    # -- receipts and background tasks -------------------------------------------------
    def _publish_receipt(self, receipt: DeliveryReceipt) -> asyncio.Future[None]:
        return self.runtime.publish_batched(DELIVERIES, receipt)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task
