"""Following a run from a terminal (`agentstream send`, `runs resume`): produce, then read its events.

`RunFollower` is a plain Kafka client with no consumer group (manual assignment of every `events`
partition, positioned at the end before producing), so it starts in milliseconds and commits
nothing; `StreamPrinter` prints the events as a person would like to read them, `RunRecorder`
collects what `--json` prints.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import TracebackType
from typing import assert_never

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import ValidationError
from rich.console import Console

from agentstream.config import KafkaSettings
from agentstream.contracts import DeltaKind, InboundMessage, NoticeLevel, ResumeRun
from agentstream.contracts import events as ev
from agentstream.kafka import Topics
from agentstream.kafka.flavor import resolve_flavor, tuning
from agentstream.kafka.near_doorbell import notify_near
from agentstream.kafka.security import client_security


class RunFollower:
    """Produce `InboundMessage`s and yield the events of the runs they cause."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self.kafka = kafka
        self.topics = Topics(kafka.topic_prefix)
        security = client_security(kafka)
        broker_tuning = tuning(kafka)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers,
            enable_idempotence=broker_tuning.idempotent,
            acks=broker_tuning.acks,
            **security,
        )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka.bootstrap_servers,
            enable_auto_commit=False,
            fetch_max_wait_ms=broker_tuning.fetch_max_wait_ms,
            group_id=None,
            **security,
        )

    async def __aenter__(self) -> RunFollower:
        try:
            await self._producer.start()
            await self._consumer.start()
            await self._assign_events()
        except BaseException:
            await self.__aexit__(None, None, None)  # a half-started client leaves nothing open
            raise
        return self

    async def _assign_events(self) -> None:
        parts = self._consumer.partitions_for_topic(self.topics.events)
        if not parts:
            await self._consumer._client.force_metadata_update()  # noqa: SLF001 - first contact with the topic
            parts = self._consumer.partitions_for_topic(self.topics.events) or set()
        if not parts:
            raise RuntimeError(f"topic {self.topics.events} does not exist: is the stack running?")
        tps = [TopicPartition(self.topics.events, p) for p in sorted(parts)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_end(*tps)
        for tp in tps:  # resolve the positions now, before the message is produced
            await self._consumer.position(tp)

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._consumer.stop()
        await self._producer.stop()

    async def send(self, message: InboundMessage) -> None:
        await self._producer.send_and_wait(
            self.topics.inbound, message.model_dump_json().encode(), key=message.conversation_key.encode()
        )
        self._notify_near(self.topics.inbound)

    async def resume(self, command: ResumeRun) -> None:
        await self._producer.send_and_wait(self.topics.runs, command.to_json(), key=command.conversation_key.encode())
        self._notify_near(self.topics.runs)

    def _notify_near(self, topic: str) -> None:
        """On the embedded broker, the paused consumer of `topic` wakes now rather than at the end
        watcher's next reading (kafka/near_doorbell.py)."""
        if tuning(self.kafka).idle is not None:
            notify_near(self.kafka.bootstrap_servers, topic)

    async def _events(self, key: str) -> AsyncIterator[ev.RunEvent]:
        """Every event of conversation `key` produced from now on."""
        async for record in self._consumer:
            if record.key is None or record.key.decode() != key or record.value is None:
                continue
            try:
                yield ev.RunEventAdapter.validate_json(record.value)
            except ValidationError:
                continue

    async def follow_resumed(self, command: ResumeRun, after_seq: int) -> AsyncIterator[ev.RunEvent]:
        """Events of the resumed run (same root run id, seq after the checkpoint's), up to its `run.finished`."""
        async for event in self._events(command.conversation_key):
            if event.root_run_id != command.run_id or event.seq <= after_seq:
                continue
            yield event
            if isinstance(event, ev.RunFinished) and event.run_id == command.run_id:
                return

    async def follow(self, message: InboundMessage) -> AsyncIterator[ev.RunEvent]:
        """Events of the run caused by `message`, up to its `run.finished`.

        Also ends on a notice for the run before it started (e.g. a refusal) or a notice
        about the message itself (e.g. it was invalid).
        """
        root: str | None = None
        started = False
        async for event in self._events(message.conversation_key):
            if root is None:
                if isinstance(event, ev.RunQueued) and event.inbound_id == message.id:
                    root = event.root_run_id
                    yield event
                continue
            if event.root_run_id != root:
                continue
            yield event
            started = started or isinstance(event, ev.RunStarted)
            if isinstance(event, ev.RunFinished) or (isinstance(event, ev.Notice) and not started):
                return


async def send_and_follow(kafka: KafkaSettings, message: InboundMessage, timeout: float) -> list[ev.RunEvent]:
    """Convenience for tests and scripts: all events of the run, in order."""
    events: list[ev.RunEvent] = []
    async with RunFollower(await resolve_flavor(kafka)) as follower:
        await follower.send(message)
        async with asyncio.timeout(timeout):
            async for event in follower.follow(message):
                events.append(event)
    return events


class StreamPrinter:
    """Writes text deltas as they arrive; tool calls and the end as dim lines."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._line_open = False

    def _newline(self) -> None:
        if self._line_open:
            self.console.print()
            self._line_open = False

    def __call__(self, event: ev.RunEvent) -> None:
        match event:
            case ev.MessageDelta(kind=DeltaKind.TEXT, text=text):
                self.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)
                self._line_open = True
            case ev.ToolCall(tool=tool, arguments=args):
                self._newline()
                self.console.print(f"[dim]→ {tool}({args})[/dim]", highlight=False)
            case ev.ToolResult(tool=tool, ok=ok, content=content, error=error):
                self.console.print(f"[dim]← {tool}: {content if ok else 'error: ' + str(error)}[/dim]", highlight=False)
            case ev.SegmentBreak():
                self._newline()
            case ev.Notice(text=text, level=level):
                self._newline()
                self.console.print(f"[{'red' if level == NoticeLevel.ERROR else 'yellow'}]{text}[/]", highlight=False)
            case ev.RunFinished(status=status, error=error, usage=usage, duration_ms=ms):
                self._newline()
                detail = f" — {error}" if error else ""
                self.console.print(
                    f"[dim]run {status}{detail} · {usage.llm_calls} LLM calls, "
                    f"{usage.total_tokens} tokens · {ms:.0f} ms[/dim]",
                    highlight=False,
                )
            case ev.MessageDelta():
                pass  # thinking is not shown
            case (
                ev.RunQueued()
                | ev.RunStarted()
                | ev.MessageStarted()
                | ev.MessageCompleted()
                | ev.StepStarted()
                | ev.StepCompleted()
                | ev.StepFailed()
                | ev.RunHeartbeat()
                | ev.ToolHeartbeat()
            ):
                pass  # the text streamed already; steps and heartbeats are the services' business
            case unexpected:
                assert_never(unexpected)


class RunRecorder:
    """What `--json` prints of a followed run: collected from its events, one document at the end."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.notices: list[dict[str, str]] = []
        self.tools: list[dict[str, object]] = []
        self.finished: ev.RunFinished | None = None

    def __call__(self, event: ev.RunEvent) -> None:
        match event:
            case ev.RunQueued() | ev.RunStarted() if self.run_id is None:
                self.run_id = event.root_run_id
            case ev.ToolResult(tool=tool, ok=ok, error=error):
                self.tools.append({"tool": tool, "ok": ok, "error": error})
            case ev.Notice(text=text, level=level):
                self.notices.append({"level": str(level), "text": text})
            case ev.RunFinished() if event.run_id == event.root_run_id:  # the root run's, not a sub-agent's
                self.finished = event
                self.run_id = event.root_run_id
            case ev.RunQueued() | ev.RunStarted() | ev.RunFinished():
                pass  # a later start, or a sub-agent's finish: the root run is already known
            case (
                ev.MessageStarted()
                | ev.MessageDelta()
                | ev.MessageCompleted()
                | ev.ToolCall()
                | ev.SegmentBreak()
                | ev.StepStarted()
                | ev.StepCompleted()
                | ev.StepFailed()
                | ev.RunHeartbeat()
                | ev.ToolHeartbeat()
            ):
                pass  # the document has the final text, the tool results and the notices
            case unexpected:
                assert_never(unexpected)

    def document(self, **head: object) -> dict[str, object]:
        done = self.finished
        return {
            **head,
            "run_id": self.run_id,
            "status": None if done is None else str(done.status),
            "reason": None if done is None or done.reason is None else str(done.reason),
            "error": None if done is None else done.error,
            "text": "" if done is None else done.text,
            "tools": self.tools,
            "notices": self.notices,
            "usage": None if done is None else done.usage.model_dump(mode="json"),
            "duration_ms": None if done is None else done.duration_ms,
        }
