"""persistence on the real broker: a hand-written run on `events` becomes rows, once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

from agentstream.config import Settings
from agentstream.contracts import (
    ChatMessage,
    DeadLetter,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    ReplyTarget,
    RunFinished,
    RunQueued,
    RunStarted,
    SegmentBreak,
    ToolCall,
    ToolResult,
    Usage,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import SEEK_TO_BEGINNING

pytestmark = pytest.mark.integration

KEY = "memory:chat-p"
TARGET = ReplyTarget(platform="memory", chat_id="chat-p")


def run_events(root: str, question: str, answer: str) -> list[bytes]:
    def ids(seq: int) -> dict[str, object]:
        return {"run_id": root, "root_run_id": root, "conversation_key": KEY, "seq": seq}

    events = [
        RunQueued(**ids(0), assistant_id="default", reply_target=TARGET, text=question, user_id="u1"),
        RunStarted(
            **ids(1),
            assistant_id="default",
            connector_id="demo",
            reply_target=TARGET,
            user_id="u1",
            input=[ChatMessage(role="user", content=question)],
        ),
        MessageStarted(**ids(2), message_id="m1"),
        MessageDelta(**ids(3), message_id="m1", text="Let me "),
        MessageDelta(**ids(4), message_id="m1", text="calculate."),
        ToolCall(**ids(5), call_id="c1", tool="calculator", arguments='{"expression": "6*7"}'),
        SegmentBreak(**ids(6)),
        ToolResult(**ids(7), call_id="c1", tool="calculator", ok=True, content="42"),
        MessageCompleted(**ids(8), message_id="m1", text="Let me calculate."),
        MessageStarted(**ids(9), message_id="m2"),
        MessageDelta(**ids(10), message_id="m2", text=answer),
        MessageCompleted(**ids(11), message_id="m2", text=answer),
        RunFinished(
            **ids(12),
            status="completed",
            text=answer,
            duration_ms=99.0,
            usage=Usage(prompt_tokens=30, completion_tokens=12, llm_calls=2),
        ),
    ]
    return [e.to_json() for e in events]


async def publish(settings: Settings, values: list[bytes], key: str = KEY) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(f"{settings.kafka.topic_prefix}events", value, key=key.encode())
    finally:
        await producer.stop()


async def wait_for_run(http: httpx.AsyncClient, run_id: str, timeout: float = 30.0) -> dict[str, object]:
    async with asyncio.timeout(timeout):
        while True:
            resp = await http.get(f"/v1/runs/{run_id}")
            if resp.status_code == 200:
                return dict(resp.json())
            await asyncio.sleep(0.1)


async def read_dlq(settings: Settings, timeout: float = 10.0) -> list[DeadLetter]:
    topic = f"{settings.kafka.topic_prefix}dlq"
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset=SEEK_TO_BEGINNING,
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(settings.kafka.partitions)])
        await consumer.seek_to_beginning()
        batch = await consumer.getmany(timeout_ms=int(timeout * 1000), max_records=10)
        return [DeadLetter.model_validate_json(r.value) for rs in batch.values() for r in rs]
    finally:
        await consumer.stop()


async def test_run_is_persisted_once(db_url: str, settings_factory: Callable[..., Settings], topics_created: str):
    settings = settings_factory(db_url=db_url)
    svc = bootstrap_persistence(settings)
    port = free_port()
    first = run_events("run-1", "calculate 6*7", "6*7 = 42")
    await publish(settings, [b"{not json", *first])
    async with (
        ServiceHost([svc], "127.0.0.1", {svc.name: port}) as host,
        httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(svc.name), timeout=5) as http,
    ):
        run = await wait_for_run(http, "run-1")
        assert (run["status"], run["text"], run["assistant_id"], run["connector_id"], run["user_id"]) == (
            "completed",
            "6*7 = 42",
            "default",
            "demo",
            "u1",
        )
        assert (run["prompt_tokens"], run["completion_tokens"], run["llm_calls"], run["duration_ms"]) == (
            30,
            12,
            2,
            99.0,
        )
        expected = [
            ("user", "calculate 6*7", None),
            ("tool", 'calculator({"expression": "6*7"}) → 42', "calculator"),
            ("assistant", "Let me calculate.", None),
            ("assistant", "6*7 = 42", None),
        ]
        messages = (await http.get(f"/v1/conversations/{KEY}/messages")).json()["items"]
        assert [(m["role"], m["content"], m["name"]) for m in messages] == expected

        # The same stream again (a re-delivery), then a sentinel run on the same partition:
        # once the sentinel is stored, the duplicate was processed before it.
        await publish(settings, first + run_events("run-2", "and 1+1?", "1+1 = 2"))
        await wait_for_run(http, "run-2")
        messages = (await http.get(f"/v1/conversations/{KEY}/messages")).json()["items"]
        assert [(m["role"], m["content"], m["name"]) for m in messages][:4] == expected
        assert len(messages) == 8
        runs = (await http.get(f"/v1/conversations/{KEY}/runs")).json()["items"]
        assert [r["run_id"] for r in runs] == ["run-1", "run-2"]
        assert len(svc.buffers) == 0
    [letter] = await read_dlq(settings)
    assert (
        letter.service == "persistence"
        and letter.raw_value == "{not json"
        and letter.error.startswith("not valid JSON: ")
    )
