"""Retention purges running while traffic flows through the five services as processes, and
ingress killed (`kill -9`) in the middle of its purge and restarted.

The ages are the shortest the configuration allows (dedupe and ledger: 1 day, history: 2 days)
and rows are seeded with ages on both sides of them; the purges run every second in batches of
ten; the expired dedupe rows are seeded once the stack is ready, so ingress's pass over them is
still under way when it is killed.
Afterwards every expired dedupe, ledger and message row is gone, no live row is gone (rows
inside their window, ledger rows not settled, runs not finished, and everything the traffic
wrote), every run ends exact, and an inbound message re-delivered inside the dedupe window is
still deduped — one the traffic sent, and one whose dedupe row was seeded half a day old.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Engine, create_engine, func, insert, select

from agentstream.contracts import LedgerState
from agentstream.contracts.inbound import KAFKA_SOURCE
from agentstream.db import Message, Run, upgrade
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.db.models_ingress import InboundDedupe
from agentstream.kafka import create_topics
from agentstream.retention import table_of
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import produce_raw
from tests.chaos.broker_stack import Stack, chat_texts, post
from tests.e2e.conftest import DEMO_ANSWER

pytestmark = pytest.mark.chaos

KILLED = "ingress"
GOOD = 8
EXPIRED_DEDUPE = 20_000  # ten per statement: ingress's pass takes seconds, long enough to be killed in
SEEDED = 300  # rows of each other kind
RETENTION = {
    "retention__interval_s": "1",
    "retention__batch_size": "10",
    "retention__inbound_dedupe_days": "1",
    "retention__delivery_ledger_days": "1",
    "retention__history_days": "2",
}
OLD = timedelta(days=3)  # past every window above
RECENT = timedelta(hours=12)  # inside every window above

dedupe, ledger, messages, runs = (table_of(m) for m in (InboundDedupe, DeliveryLedger, Message, Run))


def seed(db: Engine, now: datetime) -> None:
    def ledger_rows(prefix: str, state: LedgerState, at: datetime) -> list[dict[str, object]]:
        return [
            {"platform": "seed", "chat_id": f"{prefix}-{i}", "root_run_id": f"{prefix}-{i}", "segment": 0,
             "conversation_key": f"seed:{prefix}-{i}", "state": state, "updated_at": at}
            for i in range(SEEDED)
        ]  # fmt: skip

    def run_rows(prefix: str, finished_at: datetime | None) -> list[dict[str, object]]:
        return [
            {"run_id": f"{prefix}-{i}", "root_run_id": f"{prefix}-{i}", "conversation_key": f"seed:{prefix}",
             "status": "completed" if finished_at else "running", "started_at": now - OLD, "finished_at": finished_at}
            for i in range(SEEDED)
        ]  # fmt: skip

    with db.begin() as conn:
        conn.execute(
            insert(dedupe),
            [{"source": KAFKA_SOURCE, "platform": "memory", "message_id": f"live-{i}", "received_at": now - RECENT}
             for i in range(SEEDED)],
        )  # fmt: skip
        conn.execute(insert(ledger), ledger_rows("old-sent", LedgerState.SENT, now - OLD))
        conn.execute(insert(ledger), ledger_rows("recent-sent", LedgerState.SENT, now - RECENT))
        conn.execute(insert(ledger), ledger_rows("old-pending", LedgerState.PENDING, now - OLD))  # never settled
        conn.execute(insert(runs), run_rows("old-done", now - OLD))
        conn.execute(insert(runs), run_rows("old-running", None))  # never finished
        for prefix, age in (("old-done", OLD), ("recent", RECENT)):
            conn.execute(
                insert(messages),
                [{"conversation_key": f"seed:{prefix}", "root_run_id": f"{prefix}-{i}", "run_id": f"{prefix}-{i}",
                  "seq": 1, "part": 0, "role": "user", "content": "hi", "created_at": now - age}
                 for i in range(SEEDED)],
            )  # fmt: skip


def seed_expired_dedupe(db: Engine, now: datetime) -> None:
    """Seeded once the stack is ready: seeded before, ingress's first pass can end before anyone could kill it."""
    with db.begin() as conn:
        conn.execute(
            insert(dedupe),
            [{"source": "seed", "platform": "seed", "message_id": f"old-{i}", "received_at": now - OLD}
             for i in range(EXPIRED_DEDUPE)],
        )  # fmt: skip


def count(db: Engine, table, *where) -> int:  # type: ignore[no-untyped-def]
    with db.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(table).where(*where)) or 0)


def expired_left(db: Engine) -> dict[str, int]:
    return {
        "dedupe": count(db, dedupe, dedupe.c.message_id.like("old-%")),
        "ledger": count(db, ledger, ledger.c.chat_id.like("old-sent-%")),
        "messages": count(db, messages, messages.c.conversation_key == "seed:old-done"),
        "runs": count(db, runs, runs.c.run_id.like("old-done-%")),
    }


def live_left(db: Engine) -> dict[str, int]:
    return {
        "dedupe": count(db, dedupe, dedupe.c.message_id.like("live-%")),
        "ledger recent": count(db, ledger, ledger.c.chat_id.like("recent-sent-%")),
        "ledger unsettled": count(db, ledger, ledger.c.chat_id.like("old-pending-%")),
        "messages": count(db, messages, messages.c.conversation_key == "seed:recent"),
        "runs unfinished": count(db, runs, runs.c.run_id.like("old-running-%")),
    }


async def inbound_from_kafka(bootstrap: str, prefix: str, message_id: str, chat: str) -> None:
    """An inbound message as a platform adapter produces it (source `kafka`)."""
    record = {"type": "inbound.message", "id": message_id, "platform": "memory", "chat_id": chat,
              "user": {"id": f"user-{chat}"}, "text": "calculate 6*7"}  # fmt: skip
    await produce_raw(bootstrap, f"{prefix}inbound", json.dumps(record).encode(), key=f"memory:{chat}".encode())


async def answers(http: httpx.AsyncClient, stack: Stack, chats: list[str], timeout: float) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        texts = {chat: await chat_texts(http, stack.url("delivery"), chat) for chat in chats}
        if all(DEMO_ANSWER in t for t in texts.values()) or time.monotonic() > deadline:
            return texts
        await asyncio.sleep(0.5)


async def test_purges_killed_midway_keep_live_rows_and_dedupe(kafka_bootstrap, topic_prefix, tmp_path: Path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'stack.db'}"
    settings = make_test_settings(kafka_bootstrap, topic_prefix, url)
    await create_topics(settings.kafka)
    await upgrade(url)
    db = create_engine(f"sqlite:///{tmp_path / 'stack.db'}")
    seed(db, datetime.now(UTC))
    live_before = live_left(db)
    stack = Stack(settings, tmp_path, **RETENTION)
    stack.start()
    chats = [f"good-{i}" for i in range(GOOD)]
    ids = {chat: str(uuid.uuid4()) for chat in chats}
    try:
        await stack.wait(ready=True, timeout=180)
        seed_expired_dedupe(db, datetime.now(UTC))
        async with httpx.AsyncClient(timeout=15) as http:
            # The kill lands between two posts, once ingress has written the dedupe rows of all it
            # accepted: a kill after a batch's output and before its dedupe rows repeats that batch
            # (docs/decisions.md, "No Kafka transactions"), a window this test is not about.
            may_post, between_posts = asyncio.Event(), asyncio.Event()
            may_post.set()
            accepted: list[str] = []

            async def traffic() -> None:
                for chat in chats:
                    between_posts.set()
                    await may_post.wait()
                    between_posts.clear()
                    while True:  # a client's retry loop: the same id until a 202
                        try:
                            if (await post(http, stack.url("ingress"), chat, message_id=ids[chat])).status_code == 202:
                                accepted.append(ids[chat])
                                break
                        except httpx.TransportError:
                            pass
                        await asyncio.sleep(0.3)
                    await asyncio.sleep(0.3)
                between_posts.set()

            poster = asyncio.create_task(traffic())
            async with asyncio.timeout(120):  # until ingress's pass is under way
                while not 0 < (left := expired_left(db)["dedupe"]) < EXPIRED_DEDUPE:
                    assert left, "the dedupe purge finished before it could be interrupted"
                    await asyncio.sleep(0.05)
                may_post.clear()
                await between_posts.wait()
                while count(db, dedupe, dedupe.c.message_id.in_(accepted)) < len(accepted):  # noqa: ASYNC110 (polls the database)
                    await asyncio.sleep(0.01)
            stack.kill9(KILLED)
            killed_with = expired_left(db)["dedupe"]
            await asyncio.sleep(1.0)
            stack.restart(KILLED, "restarted")
            may_post.set()
            await poster
            await stack.wait(ready=True, timeout=180)
            texts = await answers(http, stack, chats, timeout=120)
            assert all(t == [DEMO_ANSWER] for t in texts.values()), texts

            async with asyncio.timeout(180):  # the restarted ingress and the others finish their passes
                while True:
                    if not any(expired_left(db).values()):
                        break
                    await asyncio.sleep(0.5)

            # Re-delivered inside the dedupe window: a message the traffic sent, and one seeded 12 h ago;
            # a fresh message on the same path shows that path answers.
            assert (await post(http, stack.url("ingress"), chats[0], message_id=ids[chats[0]])).status_code == 202
            await inbound_from_kafka(kafka_bootstrap, topic_prefix, "live-0", "redelivered")
            await inbound_from_kafka(kafka_bootstrap, topic_prefix, str(uuid.uuid4()), "control")
            control = await answers(http, stack, ["control"], timeout=60)
            assert control == {"control": [DEMO_ANSWER]}, control
            await asyncio.sleep(3.0)  # anything let through would have landed with the control
            assert await chat_texts(http, stack.url("delivery"), "redelivered") == []
            texts = await answers(http, stack, chats, timeout=5)

        assert live_left(db) == live_before
        traffic_rows = count(db, dedupe, dedupe.c.message_id.in_(list(ids.values())))
        assert traffic_rows == GOOD
        assert count(db, messages, messages.c.conversation_key.like("memory:good-%")) >= GOOD
        exact = [c for c, t in texts.items() if t == [DEMO_ANSWER]]
        duplicates = [c for c, t in texts.items() if t.count(DEMO_ANSWER) > 1]
        lost = [c for c, t in texts.items() if not t]
        print(
            f"\nretention + kill -9 {KILLED} mid-purge ({killed_with} of {EXPIRED_DEDUPE} expired dedupe rows left): "
            f"runs={len(chats)} exact={len(exact)} duplicates={len(duplicates)} lost={len(lost)}"
        )
        assert len(exact) == GOOD, texts
    finally:
        stopped = stack.terminate()
        db.dispose()
    assert None not in stopped.values(), (stopped, stack.stop_logs(stopped))  # each stopped by itself on SIGTERM
