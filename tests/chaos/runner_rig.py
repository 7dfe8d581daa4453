"""Agent-runner chaos rig: runner child processes to kill, the rest of the stack in this process.

`RunnerRig` builds what every runner chaos test needs around a fake LLM server: the settings (the
fake as the only connector, `resume`, an optional fake Telegram for delivery), the runners'
environment, runner `ServiceProcess`es (`agentstream serve agent-runner`, or a module such as
`tests.chaos.runner_child`) sharing one port so a restarted runner answers where the killed one
did, and persistence, tool-executor and delivery run in this process (`ServiceHost`). Leaving the
rig stops the in-process services, then every runner it made. The helpers below read what the
`events` topic and the chats show.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import RecordMetadata

from agentstream.config import Settings, TextFormat
from agentstream.contracts import MessageDelta, RunEventAdapter, RunFinished, RunQueued, StartRun
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream_delivery.app import DeliveryService
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_delivery.formatting import render
from agentstream_delivery.render import CURSOR
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeMessage, FakeTelegram
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, produce_raw
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from tests.chaos.processes import ServiceProcess, service_env

SLOW_TEXT = " ".join(f"word{i}" for i in range(40))  # at 0.25 s a token: a kill lands mid-answer
# For a kill that waits for the chat's preview first: 20 s of answer. At 0.25 s a token (10 s), a delivery
# behind at load ~9 showed its first edit only as the run completed, and the kill came after the end.
SLOW_TOKEN_S = 0.5


def previewing(messages: list[FakeMessage], index: int) -> bool:
    """Message `index` of the chat is an answer's preview, edited at least once and not yet final:
    the run is mid-answer."""
    return len(messages) == index + 1 and messages[index].edits >= 1 and messages[index].text.endswith(CURSOR)


TELEGRAM = {"chat_interval": "0.1", "edit_interval": "0.3", "buffer_threshold": "20", "drafts": "false"}
TOKEN_ENV = "CHAOS_TG_TOKEN"
# A heartbeat and a coalescing short enough for a 2 s watchdog and a kill between two deltas.
RUNNER_ENV = {"runner__heartbeat_s": "0.5", "runner__coalesce_ms": "10"}
# What runs in this process, by service name.
IN_PROCESS: dict[str, Callable[[Settings], Any]] = {
    "persistence": bootstrap_persistence,
    "tool-executor": bootstrap_tool_executor,
    "delivery": bootstrap_delivery,
}
WITH_DELIVERY = ("persistence", "tool-executor", "delivery")


class RunnerRig:
    def __init__(
        self,
        kafka_bootstrap: str,
        topic_prefix: str,
        tmp_path: Path,
        fake: FakeOpenAI,
        *,
        resume: dict[str, Any] | None = None,
        tg: FakeTelegram | None = None,
        in_process: tuple[str, ...] = ("persistence", "tool-executor"),
        runner_env: dict[str, str] | None = None,
    ) -> None:
        """`resume`: the `resume` settings; `tg`: delivery's Telegram (with "delivery" in `in_process`);
        `runner_env`: the runners' extra settings (`RUNNER_ENV` unless given)."""
        self.tmp_path = tmp_path
        self.db_path = tmp_path / "chaos.db"
        self.tg = tg
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        extra: dict[str, Any] = {"connectors": connectors, "default_connector": "fake"}
        if resume is not None:
            extra["resume"] = resume
        if tg is not None:
            extra["platforms"] = {"telegram": {**TELEGRAM, "api_url": tg.url, "token_env": TOKEN_ENV}}
        self.settings = make_test_settings(
            kafka_bootstrap, topic_prefix, f"sqlite+aiosqlite:///{self.db_path}", **extra
        )
        self.env = service_env(self.settings, **extra, **(RUNNER_ENV if runner_env is None else runner_env))
        self.port = free_port()
        self.bootstrap = self.settings.kafka.bootstrap_servers
        self.events_topic, self.runs_topic = f"{topic_prefix}events", f"{topic_prefix}runs"
        self.in_process = in_process
        self.services: dict[str, Any] = {}  # built on entering: delivery reads its token then
        self.host: ServiceHost | None = None
        self.runners: list[ServiceProcess] = []
        self._token_before: str | None = None

    @property
    def delivery(self) -> DeliveryService:
        service = self.services["delivery"]
        assert isinstance(service, DeliveryService)
        return service

    def runner(self, tag: str, *, module: str | None = None, port: int | None = None) -> ServiceProcess:
        """An agent-runner process (not started), on the rig's port unless given one."""
        process = ServiceProcess("agent-runner", self.env, port or self.port, self.tmp_path, tag, module=module)
        self.runners.append(process)
        return process

    async def __aenter__(self) -> RunnerRig:
        if self.tg is not None:  # delivery here reads the token from this process's environment
            self._token_before = os.environ.get(TOKEN_ENV)
            os.environ[TOKEN_ENV] = self.tg.token
        self.services = {name: IN_PROCESS[name](self.settings) for name in self.in_process}
        self.host = ServiceHost(list(self.services.values()), "127.0.0.1", {n: free_port() for n in self.services})
        await create_topics(self.settings.kafka)
        return self

    async def start(self, *runners: ServiceProcess) -> None:
        """The in-process services and `runners`, together (their group joins overlap)."""
        assert self.host is not None, "enter the rig first"
        await asyncio.gather(self.host.start(), *(r.start() for r in runners))

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.host is not None:
                await self.host.stop()
        finally:
            for runner in self.runners:
                runner.stop()
            if self.tg is not None:
                if self._token_before is None:
                    os.environ.pop(TOKEN_ENV, None)
                else:
                    os.environ[TOKEN_ENV] = self._token_before

    async def send(self, start: StartRun, *, queued: bool = False) -> RecordMetadata:
        """`start` on `runs`; with `queued`, first its `run.queued` on `events`, as ingress writes them."""
        key = start.conversation_key.encode()
        if queued:
            event = RunQueued(
                run_id=start.run_id,
                root_run_id=start.run_id,
                conversation_key=start.conversation_key,
                seq=0,
                assistant_id=start.assistant_id,
                reply_target=start.reply_target,
            )
            await produce_raw(self.bootstrap, self.events_topic, event.to_json(), key=key)
        return await produce_raw(self.bootstrap, self.runs_topic, start.to_json(), key=key)


# -- what the topics and the chats show ------------------------------------------------------
def events(records: list[RawRecord]) -> list[object]:
    return [RunEventAdapter.validate_json(r.value) for r in records if r.value]


def endings(records: list[RawRecord]) -> list[RunFinished]:
    out = []
    for r in records:
        if b'"run.finished"' in (r.value or b""):
            event = RunEventAdapter.validate_json(r.value)
            if isinstance(event, RunFinished):
                out.append(event)
    return out


def has_delta(records: list[RawRecord]) -> bool:
    return any(b'"message.delta"' in (r.value or b"") for r in records)


def seqs_of(records: list[RawRecord], root_run_id: str) -> list[int]:
    """The seqs of the events of `root_run_id`, in log order."""
    return [e.seq for e in events(records) if getattr(e, "root_run_id", None) == root_run_id]  # type: ignore[attr-defined]


def partial_of(records: list[RawRecord], run_id: str, before_seq: int, after_seq: int = -1) -> str:
    """What an attempt streamed before its runner died (its events between the seqs): the text delivery showed."""
    return "".join(
        e.text
        for e in events(records)
        if isinstance(e, MessageDelta)
        and e.root_run_id == run_id
        and e.kind == "text"
        and after_seq < e.seq < before_seq
    )


def shown(text: str) -> str:
    """What the chat shows of a text: delivery renders it as Telegram HTML."""
    return render(text, TextFormat.TELEGRAM_HTML)


async def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                if condition():
                    return
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


# -- the runners' group ------------------------------------------------------------------------
async def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """`group`'s committed offset of each partition of `topic` (None: never committed)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        return {p: await consumer.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        await consumer.stop()


async def committed_past(bootstrap: str, group: str, tp: TopicPartition, offset: int) -> None:
    """Wait until `group` has committed `tp` past `offset`."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        async with asyncio.timeout(30):
            while True:
                committed = await consumer.committed(tp)
                if committed is not None and committed > offset:
                    return
                await asyncio.sleep(0.1)
    finally:
        await consumer.stop()
