"""The delivery ledger on both database engines: upsert per (platform, chat, root run, segment),
load what a restarted stream needs, publish every transition."""

from __future__ import annotations

from agentstream.config import TextFormat
from agentstream.contracts import DeliveryReceipt
from agentstream.db import create_engine, session_factory, upgrade
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, SqlLedger, sha256
from agentstream_delivery.orphans import Orphan


async def test_ledger_rows_round_trip_and_publish_receipts(db_url: str):
    await upgrade(db_url)
    engine = create_engine(db_url)
    receipts: list[DeliveryReceipt] = []

    async def sink(r: DeliveryReceipt) -> None:
        receipts.append(r)

    try:
        ledger = SqlLedger(session_factory(engine), sink)
        scope = LedgerScope("telegram", "-1", "run-1", "telegram:-1")
        entry = LedgerEntry(0, "pending")
        await ledger.record(scope, entry)
        await ledger.record(scope, entry.with_text("sending", "Hi ▉", final=False))
        await ledger.record(scope, entry.with_text("sent", "Hi ▉", final=False, message_id="17"))
        await ledger.record(scope, LedgerEntry(1, "unknown", error="timed out"))
        await ledger.record(LedgerScope("telegram", "-2", "run-1", "telegram:-2"), LedgerEntry(0, "failed"))
        rows = await ledger.load(scope)
    finally:
        await engine.dispose()
    assert set(rows) == {0, 1}
    assert rows[0].state == "sent" and rows[0].message_id == "17" and rows[0].landed("Hi ▉")
    assert rows[0].text_sha256 == sha256("Hi ▉") and rows[0].text_length == 4 and not rows[0].final
    assert rows[1].state == "unknown"
    assert [(r.segment, r.state) for r in receipts[:4]] == [(0, "pending"), (0, "sending"), (0, "sent"), (1, "unknown")]
    assert receipts[2].platform_message_id == "17" and receipts[2].conversation_key == "telegram:-1"


async def test_orphans_and_known_ids_round_trip(db_url: str):
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        ledger = SqlLedger(session_factory(engine))
        scope = LedgerScope("telegram", "-1", "run-1", "telegram:-1")
        other = LedgerScope("telegram", "-1", "run-2", "telegram:-1")
        first = Orphan(0, "<b>Brok</b> ▉", TextFormat.TELEGRAM_HTML, None, 1_765_000_000.25)
        second = Orphan(1, "Two ▉", TextFormat.PLAIN, 41, 1_765_000_003.5)
        await ledger.keep_orphan(scope, first)
        await ledger.keep_orphan(scope, second)
        await ledger.keep_orphan(other, first)
        assert await ledger.orphans(scope) == [first, second]  # in the order they were kept
        await ledger.drop_orphan(scope, first)
        assert await ledger.orphans(scope) == [second] and await ledger.orphans(other) == [first]
        await ledger.record(other, LedgerEntry(0, "sent", "40"))
        await ledger.record(LedgerScope("telegram", "-2", "run-3", "telegram:-2"), LedgerEntry(0, "sent", "39"))
        assert await ledger.known_ids("telegram", ["38", "39", "40"]) == {("-1", "40"), ("-2", "39")}
    finally:
        await engine.dispose()
