"""Poison records on runs, events, tool-calls and inbound while real traffic flows through the five
services as processes, and ingress is killed (`kill -9`) and restarted in the middle of it.

Every poison record ends in `dlq` (from each service that reads its topic) naming its topic,
partition and offset, with a reason; each is logged with the same coordinates (never silent);
and every good message is answered exactly once: no loss, no duplicate. A poison record read
again after the kill may be dead-lettered twice: the dlq is at least once, the chats are exact.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentstream.contracts import DeadLetter, Notice, ReplyTarget, StartRun, ToolCallRequest, User
from agentstream.kafka import create_topics
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import produce_raw, read_until
from tests.chaos.broker_stack import Stack, chat_texts, post
from tests.e2e.conftest import DEMO_ANSWER

pytestmark = pytest.mark.chaos

GOOD = 12  # messages posted through the kill, one every ~0.3 s
KILLED = "ingress"
TARGET = ReplyTarget(platform="memory", chat_id="poison")
# The services that read each topic, so the ones that must dead-letter what is on it.
READERS = {
    "runs": {"agent-runner"},
    "events": {"persistence", "delivery"},
    "tool-calls": {"tool-executor"},
    "inbound": {"ingress"},
}


def over_long_id(topic: str) -> bytes:
    """A record of the topic's own shape, but with an id past its contract limit."""
    record: dict[str, Any]
    match topic:
        case "runs":
            start = StartRun(
                run_id="r", conversation_key="memory:poison", assistant_id="default", user=User(id="u"), text="hi",
                reply_target=TARGET,
            )  # fmt: skip
            record = {**start.model_dump(mode="json"), "run_id": "r" * 500}
        case "events":
            notice = Notice(
                run_id="n", root_run_id="n", conversation_key="memory:poison", seq=0, text="hi", reply_target=TARGET
            )
            record = {**notice.model_dump(mode="json"), "run_id": "n" * 500}
        case "tool-calls":
            call = ToolCallRequest(
                run_id="r", root_run_id="r", conversation_key="memory:poison", call_id="c", tool="calculator",
                arguments='{"expression": "1+1"}',
            )  # fmt: skip
            record = {**call.model_dump(mode="json"), "call_id": "c" * 500}
        case _:
            record = {"type": "inbound.message", "id": "i" * 5000, "platform": "memory", "chat_id": "poison",
                      "user": {"id": "u"}, "text": "hi"}  # fmt: skip
    return json.dumps(record).encode()


# Made once: a record's defaults (its id, its time) differ on every construction.
POISON = {
    topic: [
        b"[" * 5000,  # nested past any recursion limit
        b"\xff\xfe{\x80 not utf-8",
        json.dumps({"type": "something.else", "hello": ["world"]}).encode(),  # valid JSON, wrong shape
        over_long_id(topic),
    ]
    for topic in READERS
}


def logged_coordinates(workdir: Path) -> set[tuple[str, int, int]]:
    """(topic, partition, offset) of every dead letter or handler failure any service logged."""
    found = set()
    for log in workdir.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            entry = json.loads(line)
            if entry.get("event") in ("dead letter", "handler failed") and entry.get("offset") is not None:
                found.add((entry["topic"], entry["partition"], entry["offset"]))
    return found


async def post_until_accepted(http: httpx.AsyncClient, stack: Stack, chat: str) -> None:
    """A client's retry loop: the same id until a 202 (ingress may be dead or restarting)."""
    message_id = str(uuid.uuid4())
    while True:
        try:
            if (await post(http, stack.url("ingress"), chat, message_id=message_id)).status_code == 202:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.3)


async def test_poison_records_dead_lettered_while_ingress_is_killed(kafka_bootstrap, topic_prefix, tmp_path):
    settings = make_test_settings(kafka_bootstrap, topic_prefix, f"sqlite+aiosqlite:///{tmp_path / 'stack.db'}")
    await create_topics(settings.kafka)
    stack = Stack(settings, tmp_path)
    stack.start()
    chats = [f"good-{i}" for i in range(GOOD)]
    try:
        await stack.wait(ready=True, timeout=180)
        async with httpx.AsyncClient(timeout=15) as http:

            async def traffic() -> None:
                for chat in chats:
                    await post_until_accepted(http, stack, chat)
                    await asyncio.sleep(0.3)

            poster = asyncio.create_task(traffic())
            await asyncio.sleep(1.0)
            for topic in READERS:
                for value in POISON[topic]:
                    await produce_raw(kafka_bootstrap, f"{topic_prefix}{topic}", value, key=b"poison")
            stack.kill9(KILLED)  # right after its poison: some of it is read again after the restart
            await asyncio.sleep(1.5)
            stack.restart(KILLED, "restarted")
            await poster
            await stack.wait(ready=True, timeout=180)

            deadline = time.monotonic() + 120
            while True:
                texts = {chat: await chat_texts(http, stack.url("delivery"), chat) for chat in chats}
                if all(DEMO_ANSWER in t for t in texts.values()) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            await asyncio.sleep(2.0)  # a duplicate would land now
            texts = {chat: await chat_texts(http, stack.url("delivery"), chat) for chat in chats}

        wanted: dict[tuple[str, int, int], set[str]] = {}
        for topic, readers in READERS.items():
            poison = POISON[topic]

            def all_poison(records: list[Any], poison: list[bytes] = poison) -> bool:
                return sum(r.value in poison for r in records) >= len(poison)

            # Until every poison record shows: on Tansu a fresh reader may see an older end offset.
            for r in await read_until(kafka_bootstrap, f"{topic_prefix}{topic}", all_poison, timeout=60):
                if r.value in poison:
                    wanted[(r.topic, r.partition, r.offset)] = readers
        assert len(wanted) == len(READERS) * 4, wanted

        def every_letter_in(records: list[Any]) -> bool:
            seen: dict[tuple[str, int, int], set[str]] = {}
            for r in records:
                letter = DeadLetter.model_validate_json(r.value or b"")
                where = (letter.source_topic, letter.source_partition, letter.source_offset)
                seen.setdefault(where, set()).add(letter.service)
            return all(readers <= seen.get(where, set()) for where, readers in wanted.items())

        dlq = await read_until(kafka_bootstrap, f"{topic_prefix}dlq", every_letter_in, timeout=60)
        letters = [DeadLetter.model_validate_json(r.value or b"") for r in dlq]
        for letter in letters:
            assert letter.error and "Traceback" not in letter.error and "\n" not in letter.error, letter
        assert set(wanted) <= logged_coordinates(tmp_path)

        exact = [c for c, t in texts.items() if t == [DEMO_ANSWER]]
        duplicates = [c for c, t in texts.items() if t.count(DEMO_ANSWER) > 1]
        lost = [c for c, t in texts.items() if not t]
        print(
            f"\npoison records + kill -9 {KILLED}: runs={len(chats)} exact={len(exact)} duplicates={len(duplicates)} "
            f"lost={len(lost)} poison={len(wanted)} letters={len(letters)}"
        )
        assert len(exact) == len(chats), texts
    finally:
        stopped = stack.terminate()
    assert None not in stopped.values(), (stopped, stack.stop_logs(stopped))  # each stopped by itself on SIGTERM
