"""A delivery process against a fake Telegram, for the ledger chaos tests.

delivery runs as `agentstream serve delivery` (killed with SIGKILL, restarted); this
test process publishes run events on Kafka and owns the fake Telegram, a real HTTP
server whose records prove what each chat shows. `tally` checks the invariant of every
test (each chat shows exactly its run's final answer, no cursor, nothing posted twice,
nothing lost, no ledger row left `pending`/`sending`, no stream left open) and prints
one row of the table: fault, runs, exact finals, duplicates, lost.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from agentstream.contracts import DeliveryReceipt, EventBase, MessageDelta, ReplyTarget, RunFinished, RunStarted
from agentstream.kafka import create_topics, free_port
from agentstream_testing.fake_platforms import FakeTelegram
from agentstream_testing.fixtures import ADMIN_HEADERS, make_test_settings
from tests.chaos.processes import ServiceProcess, service_env

CURSOR = "▉"
# Short timings (2 cores): a call times out after 0.5 s; an unknown call may land for 2.5 s.
TELEGRAM = {
    "timeout_s": 0.5,
    "late_landing_s": 2.5,
    "chat_interval": 0.1,
    "edit_interval": 0.2,
    "buffer_threshold": 20,
    "token_env": "CHAOS_TG_TOKEN",
}


def answer(i: int, words: int = 12) -> str:
    return " ".join(f"w{i}.{k}" for k in range(words)) + "."


class DeliveryRig:
    def __init__(
        self, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, tg: FakeTelegram, **telegram: Any
    ) -> None:
        self.db_path = tmp_path / "delivery.db"
        self.settings = make_test_settings(kafka_bootstrap, topic_prefix, f"sqlite+aiosqlite:///{self.db_path}")
        self.prefix = topic_prefix
        self.tg = tg
        self.tmp_path = tmp_path
        conf = {**TELEGRAM, **telegram, "api_url": tg.url}
        self.env = {
            **service_env(self.settings),
            "CHAOS_TG_TOKEN": tg.token,
            **{f"AGENTSTREAM__PLATFORMS__TELEGRAM__{k.upper()}": str(v) for k, v in conf.items()},
        }
        self.port = free_port()
        self.starts = 0
        self.delivery: ServiceProcess | None = None
        self.producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False, linger_ms=0)

    async def __aenter__(self) -> DeliveryRig:
        await create_topics(self.settings.kafka)
        await self.producer.start()
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.producer.stop()
        if self.delivery is not None:
            self.delivery.stop()

    async def start(self) -> None:
        self.starts += 1
        self.delivery = ServiceProcess("delivery", self.env, self.port, self.tmp_path, str(self.starts))
        await self.delivery.start()

    async def kill9_and_restart(self) -> None:
        assert self.delivery is not None
        self.delivery.kill9()
        await self.start()

    def log(self) -> str:
        assert self.delivery is not None
        return self.delivery.log.read_text()

    # -- events ------------------------------------------------------------------------
    async def publish(self, ev: EventBase, partition: int | None = None) -> None:
        await self.producer.send_and_wait(
            f"{self.prefix}events", ev.to_json(), key=ev.conversation_key.encode(), partition=partition
        )

    async def run(
        self, rid: str, chat: str, text: str, *, pause: float = 0.0, finish: bool = True, partition: int | None = None
    ) -> None:
        """One run streamed word by word into `chat`; `finish=False` leaves it open."""
        ids = {"run_id": rid, "root_run_id": rid, "conversation_key": f"telegram:{chat}"}
        await self.publish(
            RunStarted(
                **ids,
                seq=1,
                assistant_id="a",
                connector_id="demo",
                reply_target=ReplyTarget(platform="telegram", chat_id=chat),
            ),
            partition,
        )
        words = text.split(" ")
        for k, word in enumerate(words):
            await self.publish(
                MessageDelta(**ids, seq=2 + k, message_id="m1", text=word if k == 0 else " " + word), partition
            )
            if pause:
                await asyncio.sleep(pause)
        if finish:
            await self.finish(rid, chat, text, seq=2 + len(words), partition=partition)

    async def finish(self, rid: str, chat: str, text: str, *, seq: int, partition: int | None = None) -> None:
        ids = {"run_id": rid, "root_run_id": rid, "conversation_key": f"telegram:{chat}"}
        await self.publish(RunFinished(**ids, seq=seq, status="completed", text=text), partition)

    # -- observations ------------------------------------------------------------------
    async def until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        try:
            async with asyncio.timeout(timeout):
                while not condition():
                    assert self.delivery is not None and self.delivery.proc is not None
                    assert self.delivery.proc.poll() is None, self.log()
                    await asyncio.sleep(0.1)
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what}; delivery's warnings:\n{self.warnings()}") from None

    def warnings(self) -> str:
        """The delivery log's lines above `info`, and its orphan search: what a timeout needs to be explained."""
        keep = ("warning", "error", "critical", "orphan")
        return "\n".join(line for line in self.log().splitlines() if any(k in line.lower() for k in keep))[-8000:]

    async def receipts(self) -> list[DeliveryReceipt]:
        """Every `DeliveryReceipt` published on `deliveries` so far (each ledger transition)."""
        consumer = AIOKafkaConsumer(
            f"{self.prefix}deliveries",
            bootstrap_servers=self.settings.kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            out: list[DeliveryReceipt] = []
            while batch := await consumer.getmany(timeout_ms=1000):
                out += [DeliveryReceipt.model_validate_json(r.value or b"") for rs in batch.values() for r in rs]
            return out
        finally:
            await consumer.stop()

    def ledger_states(self) -> list[str]:
        with sqlite3.connect(self.db_path) as db:
            return [row[0] for row in db.execute("SELECT state FROM delivery_ledger")]

    async def open_streams(self) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(headers=ADMIN_HEADERS, timeout=5) as http:
            resp = await http.get(f"http://127.0.0.1:{self.port}/v1/streams")
            resp.raise_for_status()
            return list(resp.json()["streams"])


@dataclass
class Tally:
    fault: str
    runs: int = 0
    exact: int = 0
    duplicates: int = 0
    lost: int = 0
    orphans: int = 0

    def row(self) -> str:
        return f"| {self.fault} | {self.runs} | {self.exact} | {self.duplicates} | {self.lost} |" + (
            f" orphan stubs: {self.orphans}" if self.orphans else ""
        )


async def tally(rig: DeliveryRig, fault: str, finals: dict[str, str], orphans: dict[str, int] | None = None) -> Tally:
    """Counts per chat (chat → the text its last message must show) and asserts the invariant."""
    tg, t = rig.tg, Tally(fault)
    for chat, final in finals.items():
        texts = tg.texts(chat)
        stubs = (orphans or {}).get(chat, 0)
        t.runs += 1
        t.orphans += stubs
        t.exact += texts[stubs:] == [final]
        t.duplicates += max(0, len(texts) - 1 - stubs)
        t.lost += final not in texts
    print(f"\n| fault | runs | exact finals | duplicates | lost |\n|---|---|---|---|---|\n{t.row()}")
    states = rig.ledger_states()
    streams = await rig.open_streams()
    assert (t.exact, t.duplicates, t.lost) == (t.runs, 0, 0), {c: tg.texts(c) for c in finals}
    assert not any(CURSOR in text for chat in finals for text in tg.texts(chat)[(orphans or {}).get(chat, 0) :])
    assert "pending" not in states and "sending" not in states, states
    assert streams == [], streams  # every run terminal: no stream still open (or settling)
    return t
