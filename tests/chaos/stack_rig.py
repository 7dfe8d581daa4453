"""The five services as separate processes under traffic, for the membership chaos tests.

Twenty conversations enter as `InboundMessage`s on `inbound` (so through ingress), each run asks
the fake LLM server, which answers its first turn with a calculator call (the tool-executor is
tests/chaos/tool_executor_child.py: its calculator logs each execution to a file and takes
`TOOL_DELAY_S`, so calls are in flight when a replica goes) and its second by echoing the question,
token by token; delivery streams the answer into a fake Telegram chat per conversation (a real
HTTP server every delivery replica talks to). `figures` gives the row of the table: what the
events topic, the LLM server's request log, the chats, the tool log and the database show.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psycopg
from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.config import TextFormat
from agentstream.contracts import (
    InboundMessage,
    RunEventAdapter,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepType,
    User,
)
from agentstream.kafka import create_topics, free_port
from agentstream_delivery.formatting import render
from agentstream_delivery.render import ENDING_TEXTS, RESUMED_MARKER, RESUMED_NOTICE
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import produce_raw
from tests.chaos.processes import ServiceProcess, service_env

CONVERSATIONS = 20
WAVES = 4  # the conversations start in waves, so some stream whenever membership changes
WORDS = 30
TOKEN_DELAY_S = 0.25  # each answer streams for ~7.5 s
TOOL_DELAY_S = 1.5  # each calculator call runs this long
START_S = 120.0  # a replica's start, to ready, on a loaded machine
GRACE_S = 40.0  # shutdown.grace_s: a stopping replica's work finishes, even on a loaded machine
TELEGRAM = {"chat_interval": "0.1", "edit_interval": "0.3", "buffer_threshold": "20", "drafts": "false"}
SERVICES = ("persistence", "ingress", "agent-runner", "tool-executor", "delivery")
# What a chat shows of a cut: an ending marker in the broken-off message, the resumed notice.
CUT_MARKERS = (*ENDING_TEXTS.values(), RESUMED_MARKER.strip(), RESUMED_NOTICE)
WANTED = tuple(f'"{t}"'.encode() for t in ("run.started", "run.finished", "step.completed"))


def chat(i: int) -> str:
    return f"-{8100 + i}"  # a group chat: the preview is one message, edited


def question(i: int) -> str:
    return " ".join(f"c{i}w{j}" for j in range(WORDS))  # echoed back as the answer


def expression(i: int) -> str:
    return f"{i + 1}*7"


def shown(text: str) -> str:
    """What the chat shows of a text: delivery renders it as Telegram HTML."""
    return render(text, TextFormat.TELEGRAM_HTML)


def inbound(i: int) -> InboundMessage:
    return InboundMessage(id=f"m{i}", platform="telegram", chat_id=chat(i), user=User(id=f"u{i}"), text=question(i))


def first_request_of(text: str) -> Callable[[dict[str, Any]], bool]:
    """A run's first model request (its question, no tool answer yet): each run its own tool call."""

    def matches(body: dict[str, Any]) -> bool:
        messages = body["messages"]
        return not any(m["role"] == "tool" for m in messages) and messages[-1]["content"] == text

    return matches


def streaming_answer_of(text: str) -> Callable[[Any], bool]:
    """A request of the answering turn (after the tool's answer) whose tokens are going out."""

    def matches(request: Any) -> bool:
        messages = request.messages
        return (
            any(m["role"] == "tool" for m in messages)
            and any(m["role"] == "user" and m["content"] == text for m in messages)
            and request.first_token_at is not None
        )

    return matches


class EventLog:
    """Run starts, endings and completed steps on `events`, read as they come (no group)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        self.topic = topic
        self.events: list[Any] = []
        self.changed = asyncio.Event()  # a wanted event came
        self.progress = asyncio.Event()  # any record came
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for record in self.consumer:
            self.progress.set()
            if any(w in (record.value or b"") for w in WANTED):
                self.events.append(RunEventAdapter.validate_json(record.value or b""))
                self.changed.set()

    async def catch_up(self, timeout: float = 60.0) -> None:
        """Until everything on the topic now has been read."""
        partitions = [
            TopicPartition(self.topic, p) for p in sorted(self.consumer.partitions_for_topic(self.topic) or ())
        ]
        ends = await self.consumer.end_offsets(partitions)
        async with asyncio.timeout(timeout):
            for tp, end in ends.items():
                while await self.consumer.position(tp) < end:
                    self.progress.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.5):
                            await self.progress.wait()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.consumer.stop()


class StackRig:
    """`async with StackRig(...) as rig`: the broker's topics, the fakes' wiring and the events log;
    `start` brings up replicas, `send` a wave of conversations, `until` waits on what they show."""

    def __init__(
        self, bootstrap: str, prefix: str, db_url: str, tmp_path: Path, fake: FakeOpenAI, tg: FakeTelegram
    ) -> None:
        self.fake, self.tg, self.tmp_path, self.db_url = fake, tg, tmp_path, db_url
        for i in range(CONVERSATIONS):  # every run's first turn: a calculator call of its own
            fake.add_turn(
                tool_calls=[("calculator", {"expression": expression(i)})], when=first_request_of(question(i))
            )
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        platforms = {"telegram": {**TELEGRAM, "api_url": tg.url, "token_env": "CHAOS_TG_TOKEN"}}
        self.settings = make_test_settings(
            bootstrap,
            prefix,
            db_url,
            connectors=connectors,
            default_connector="fake",
            kafka={"partitions": 4},
            shutdown={"grace_s": GRACE_S},
            platforms=platforms,
        )
        self.tool_log = tmp_path / "executions.log"
        self.env = {
            **service_env(
                self.settings,
                connectors=connectors,
                default_connector="fake",
                platforms=platforms,
                runner__coalesce_ms="10",
                runner__tool_timeout_s="120",
            ),
            "CHAOS_TG_TOKEN": tg.token,
            "CHAOS_TOOL_LOG": str(self.tool_log),
            "CHAOS_TOOL_DELAY_S": str(TOOL_DELAY_S),
        }
        self.log = EventLog(bootstrap, f"{prefix}events")
        self.processes: list[ServiceProcess] = []

    async def __aenter__(self) -> StackRig:
        await create_topics(self.settings.kafka)
        await self.log.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for p in self.processes:
            p.stop()
        await self.log.stop()

    def replica(self, service: str, tag: str) -> ServiceProcess:
        module = "tests.chaos.tool_executor_child" if service == "tool-executor" else None
        p = ServiceProcess(service, self.env, free_port(), self.tmp_path, tag, module=module)
        self.processes.append(p)
        return p

    def kill9(self, replica: ServiceProcess) -> None:
        """`kill -9` of `replica`: no longer watched for an unexpected exit."""
        replica.kill9()
        self.processes.remove(replica)

    async def start(self, target: str, replicas: int) -> list[ServiceProcess]:
        """One replica of every service but `target`, `replicas` of it; returns the target's."""
        first = self.replica("persistence", "0" if target != "persistence" else "old0")
        await first.start(START_S)  # it migrates the database before the others read it
        ours = [first] if target == "persistence" else []
        rest = [s for s in SERVICES if s != "persistence"]
        others = [self.replica(s, "0") for s in rest if s != target]
        ours += [self.replica(target, f"old{i}") for i in range(replicas - len(ours))]
        await asyncio.gather(*(p.start(START_S) for p in [*others, *ours] if p is not first))
        return ours

    async def send(self, conversations: Iterable[int]) -> None:
        bootstrap, topic = self.settings.kafka.bootstrap_servers, f"{self.settings.kafka.topic_prefix}inbound"
        for i in conversations:
            msg = inbound(i)
            await produce_raw(bootstrap, topic, msg.to_json(), key=msg.conversation_key.encode())

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
        """Wait (on the event log's and the fakes' changes, polled) until `condition` holds."""
        try:
            async with asyncio.timeout(timeout):
                while not condition():
                    for p in self.processes:
                        assert p.proc is None or p.proc.poll() in (None, 0), p.log.read_text()[-4000:]
                    self.log.changed.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(0.2):
                            await self.log.changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}") from None

    def executing(self, conversations: Iterable[int]) -> bool:
        """Every one of `conversations` has its calculator call running (or run)."""
        ran = set(self.executions())
        return all(expression(i) in ran for i in conversations)

    def streaming(self, conversations: Iterable[int]) -> bool:
        """Every one of `conversations` has its answer's tokens going out."""
        return all(any(streaming_answer_of(question(i))(r) for r in self.fake.requests) for i in conversations)

    def completed(self) -> set[str]:
        return {e.conversation_key for e in self.log.events if isinstance(e, RunFinished) and e.status == "completed"}

    def answered(self) -> bool:
        """Every run ended completed and every chat's last message shows its whole answer."""
        done = self.completed()
        return all(
            inbound(i).conversation_key in done and self.tg.texts(chat(i))[-1:] == [shown(question(i))]
            for i in range(CONVERSATIONS)
        )

    def executions(self) -> list[str]:
        text = self.tool_log.read_text() if self.tool_log.exists() else ""
        return [json.loads(line)["expression"] for line in text.splitlines()]

    async def stored(self) -> int:
        """Runs persistence stored as completed, each once."""
        url = self.db_url.replace("postgresql+psycopg://", "postgresql://", 1)
        async with await psycopg.AsyncConnection.connect(url) as db:
            cursor = await db.execute("SELECT count(*) FROM runs WHERE status = 'completed' AND parent_run_id IS NULL")
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def figures(self) -> dict[str, int]:
        events = self.log.events
        roots = [e for e in events if isinstance(e, RunFinished) and e.run_id == e.root_run_id]
        started = Counter(e.root_run_id for e in events if isinstance(e, RunStarted))
        completed = Counter(e.conversation_key for e in roots if e.status == "completed")
        steps = Counter(
            (e.root_run_id, json.dumps([m.model_dump(mode="json") for m in e.memory], sort_keys=True))
            for e in events
            if isinstance(e, StepCompleted) and e.step_type == StepType.LLM
        )
        asked = Counter(json.dumps(r.messages, sort_keys=True) for r in self.fake.requests)
        whole = shown_twice = lost = 0
        for i in range(CONVERSATIONS):
            key, texts, final = inbound(i).conversation_key, self.tg.texts(chat(i)), shown(question(i))
            ending = [e for e in roots if e.conversation_key == key]
            # The answer once, as the chat's last message (above it the tool line); no cut marker.
            whole += (
                texts[-1:] == [final]
                and texts.count(final) == 1
                and not any(marker in text for text in texts for marker in CUT_MARKERS)
            ) and [(e.status, e.text) for e in ending] == [("completed", question(i))]
            shown_twice += max(0, texts.count(final) - 1)
            lost += completed[key] == 0 or final not in texts
        return {
            "runs": CONVERSATIONS,
            "whole, no cut marker": whole,
            "cut": sum(1 for e in roots if e.status != "completed"),
            "resumed": sum(n - 1 for n in started.values()),
            "duplicates": sum(n - 1 for n in completed.values()) + shown_twice,
            "lost": lost,
            "LLM requests repeated": sum(n - 1 for n in asked.values()),
            "finished LLM steps repeated": sum(n - 1 for n in steps.values()),
            "tool calls run twice": sum(n - 1 for n in Counter(self.executions()).values()),
            "stored": await self.stored(),
        }


def report(title: str, figures: dict[str, int]) -> None:
    """The row for the closing note's table, printed (`-s`)."""
    print(f"\n{title}:\n| " + " | ".join(figures) + " |\n| " + " | ".join(str(v) for v in figures.values()) + " |")


UNCUT = {
    "runs": CONVERSATIONS,
    "whole, no cut marker": CONVERSATIONS,
    "cut": 0,
    "resumed": 0,
    "duplicates": 0,
    "lost": 0,
    "LLM requests repeated": 0,
    "finished LLM steps repeated": 0,
    "tool calls run twice": 0,
    "stored": CONVERSATIONS,
}
