"""`kill -9` of delivery in the middle of 20 concurrent streams, then restart.

delivery runs as its own `agentstream serve delivery` process against a fake Telegram
in this test process. Twenty runs stream into twenty chats; once every chat shows its
first preview, delivery is killed with SIGKILL while the streams go on (events pile up
on Kafka). A new delivery process re-reads from the committed offsets, finds the ledger
rows and edits the messages already posted. The fake's records prove every final text
exact and no message posted twice.
"""

from __future__ import annotations

import asyncio
import signal

import httpx
import pytest
from aiokafka import AIOKafkaProducer

from agentstream.contracts import EventBase, MessageDelta, ReplyTarget, RunFinished, RunStarted
from agentstream.kafka import create_topics, free_port
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.fixtures import ADMIN_HEADERS, kafka_env, make_test_settings
from tests.e2e.processes import spawn, stop

pytestmark = pytest.mark.chaos

STREAMS = 20
DELTAS = 60
DELTA_PAUSE_S = 0.1  # each stream lasts ~6 s


def answer(i: int) -> str:
    return " ".join(f"w{i}.{k}" for k in range(DELTAS)) + "."


async def wait_ready(port: int, proc, log) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(headers=ADMIN_HEADERS, timeout=2) as http, asyncio.timeout(60):
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def test_kill9_mid_stream_then_restart_every_final_exact_no_duplicates(kafka_bootstrap, topic_prefix, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'delivery.db'}"
    settings = make_test_settings(kafka_bootstrap, topic_prefix, db)
    await create_topics(settings.kafka)
    async with FakeTelegram(per_chat_interval=1.0) as tg:
        env = {
            **kafka_env(settings),
            "AGENTSTREAM__DATABASE__URL": db,
            "AGENTSTREAM__PLATFORMS__TELEGRAM__API_URL": tg.url,
            "AGENTSTREAM__PLATFORMS__TELEGRAM__TOKEN_ENV": "CHAOS_TG_TOKEN",
            "CHAOS_TG_TOKEN": tg.token,
        }
        port = free_port()
        logs = [tmp_path / "delivery-1.log", tmp_path / "delivery-2.log"]
        proc = spawn(["serve", "delivery", "--port", str(port)], env, tmp_path, logs[0])
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False, linger_ms=0)
        await producer.start()
        try:
            await wait_ready(port, proc, logs[0])
            chats = [f"-{1000 + i}" for i in range(STREAMS)]

            async def publish(ev: EventBase) -> None:
                await producer.send_and_wait(f"{topic_prefix}events", ev.to_json(), key=ev.conversation_key.encode())

            async def run(i: int) -> None:
                chat, rid = chats[i], f"run-{i}"
                ids = {"run_id": rid, "root_run_id": rid, "conversation_key": f"telegram:{chat}"}
                await publish(
                    RunStarted(
                        **ids,
                        seq=1,
                        assistant_id="a",
                        connector_id="demo",
                        reply_target=ReplyTarget(platform="telegram", chat_id=chat),
                    )
                )
                words = answer(i).split(" ")
                for k, word in enumerate(words):
                    await publish(MessageDelta(**ids, seq=2 + k, message_id="m1", text=word if k == 0 else " " + word))
                    await asyncio.sleep(DELTA_PAUSE_S)
                await publish(RunFinished(**ids, seq=2 + len(words), status="completed", text=answer(i)))

            runs = asyncio.gather(*(run(i) for i in range(STREAMS)))
            async with asyncio.timeout(30):  # every chat shows its first preview: all streams are open
                while True:
                    if all(tg.messages(c) for c in chats):
                        break
                    await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)
            stop(proc, signal.SIGKILL)
            killed_with = [len(tg.messages(c)) for c in chats]
            proc = spawn(["serve", "delivery", "--port", str(port)], env, tmp_path, logs[1])
            await runs
            async with asyncio.timeout(90):
                while not all(tg.texts(c) == [answer(i)] for i, c in enumerate(chats)):
                    assert proc.poll() is None, logs[1].read_text()
                    await asyncio.sleep(0.2)
        finally:
            await producer.stop()
            stop(proc)

    assert killed_with == [1] * STREAMS
    for i, chat in enumerate(chats):
        assert tg.texts(chat) == [answer(i)]  # the exact final text, in one message
        assert len(tg.calls_to(chat, "sendMessage")) == 1  # never posted twice
        assert not any(m.deleted for m in tg.chats[chat])
    assert "stream resumed from ledger" in logs[1].read_text()
