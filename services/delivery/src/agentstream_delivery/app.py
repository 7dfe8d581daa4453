"""delivery service: routes run events to one stream per (root run, target).

The handler stays thin: decode, pick the stream, hand it an input. Decisions live in
`consumer` (pure), platform calls in `streams` and the adapters.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Gauge
from pydantic import ValidationError
from rich.console import Console

from agentstream.config import Settings
from agentstream.contracts import Notice, ReplyTarget, RunEvent, RunEventAdapter, RunFinished, RunStarted
from agentstream.service import Service, describe_validation_error
from agentstream_delivery.adapters import ConsoleAdapter, MemoryAdapter, PlatformAdapter
from agentstream_delivery.api import add_routes
from agentstream_delivery.consumer import Cadence, finish_input, stream_input
from agentstream_delivery.streams import StreamActor, StreamKey, StreamRegistry

FinishedListener = Callable[[RunFinished], Awaitable[None] | None]


class DeliveryService(Service):
    name = "delivery"

    def __init__(self, settings: Settings, console: Console | None = None) -> None:
        self.memory = MemoryAdapter()
        self.console_adapter = ConsoleAdapter(console)
        self.streams = StreamRegistry()
        self.finished_listeners: list[FinishedListener] = []
        self._warned_platforms: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        super().__init__(settings)

    def setup(self) -> None:
        self.adapters: dict[str, PlatformAdapter] = {
            a.platform: a for a in (self.memory, self.console_adapter) if self._enabled(a.platform)
        }
        self.platform_calls = Counter(
            "agentstream_delivery_platform_calls_total", "Platform API calls", ["platform", "op", "outcome"],
            registry=self.registry,
        )
        open_streams = Gauge("agentstream_delivery_open_streams", "Streams being delivered", registry=self.registry)
        open_streams.set_function(lambda: len(self.streams.all()))
        self.broker.subscriber(self.topics.events, **self.subscriber_options())(self.on_event)
        add_routes(self.http, self.streams, self.memory)

    async def on_stop(self) -> None:
        await self.streams.cancel_all()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for adapter in self.adapters.values():
            await adapter.close()

    # -- the handler -----------------------------------------------------------------
    async def on_event(self, msg: KafkaMessage) -> None:
        event = self.decode(msg, RunEventAdapter)
        if isinstance(event, ValidationError):
            await self.dead_letter(msg, "invalid RunEvent: " + describe_validation_error(event))
            return
        await self.handle(event)

    async def handle(self, event: RunEvent) -> None:
        match event:
            case Notice():
                await self._deliver_notice(event)
            case RunStarted():
                self._open(event)
            case RunFinished():
                self._finish(event)
            case _:
                inp = stream_input(event)
                if inp is None:
                    return
                actors = self.streams.of(event.root_run_id)
                if not actors:
                    self.log.debug("event without stream ignored", type=event.type, root_run_id=event.root_run_id)
                for actor in actors:
                    actor.feed(inp)

    # -- stream lifecycle --------------------------------------------------------------
    def _open(self, event: RunStarted) -> None:
        if event.run_id != event.root_run_id:
            return  # only the root run owns the stream
        adapter = self._adapter(event.reply_target.platform)
        if adapter is None:
            return
        actor = StreamActor(
            StreamKey.of(event.root_run_id, event.reply_target), event.reply_target, adapter, self._cadence(adapter),
            self.log, observe=lambda platform, op, ok: self.platform_calls.labels(
                platform, op, "ok" if ok else "error").inc(),
        )
        if not self.streams.add(actor):
            self.log.info("run.started for an open stream ignored", root_run_id=event.root_run_id)

    def _finish(self, event: RunFinished) -> None:
        actors = self.streams.pop(event.root_run_id)
        for actor in actors:
            actor.feed(finish_input(event))
        task = asyncio.create_task(self._after_finish(actors, event))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_finish(self, actors: list[StreamActor], event: RunFinished) -> None:
        """Listeners hear of the run once every target has its final text.

        They are told even when no stream was open (platform without adapter, run
        started before this process): whoever waits for the run must not hang.
        """
        await asyncio.gather(*(a.task for a in actors if a.task is not None), return_exceptions=True)
        for listener in list(self.finished_listeners):
            try:
                result = listener(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # one broken listener must not hide the run from the others
                self.log.exception("finished listener failed", root_run_id=event.root_run_id)

    async def _deliver_notice(self, event: Notice) -> None:
        target = event.reply_target or self._target_of(event.root_run_id)
        if target is None:
            self.log.info("notice without reply target dropped", root_run_id=event.root_run_id)
            return
        adapter = self._adapter(target.platform)
        if adapter is None:
            return
        try:
            await adapter.send(target, event.text, final=True)
            self.platform_calls.labels(target.platform, "send", "ok").inc()
        except Exception as err:
            self.platform_calls.labels(target.platform, "send", "error").inc()
            self.log.warning("notice not delivered", platform=target.platform, error=repr(err))

    # -- platforms -----------------------------------------------------------------
    def _enabled(self, platform: str) -> bool:
        conf = self.settings.platforms.get(platform)
        return conf is None or conf.enabled

    def _adapter(self, platform: str) -> PlatformAdapter | None:
        adapter = self.adapters.get(platform)
        if adapter is None and platform not in self._warned_platforms:
            self._warned_platforms.add(platform)
            self.log.warning("no adapter for platform; its messages are dropped", platform=platform)
        return adapter

    def _cadence(self, adapter: PlatformAdapter) -> Cadence:
        conf = self.settings.platforms.get(adapter.platform)
        interval = conf.edit_interval if conf is not None and conf.edit_interval else adapter.edit_interval
        return Cadence(edit_interval=interval, can_edit=adapter.can_edit)

    def _target_of(self, root_run_id: str) -> ReplyTarget | None:
        actors = self.streams.of(root_run_id)
        return actors[0].target if actors else None
