"""The delivery ledger on SQLite and PostgreSQL: rows per platform message, what they say, the receipts."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import structlog
from sqlalchemy import select

from agentstream.contracts import DeliveryReceipt
from agentstream.contracts.deliveries import LedgerState
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_delivery import DeliveryLedger
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, MemoryLedger, ReceiptQueue, SqlLedger, sha256

SCOPE = LedgerScope(platform="telegram", chat_id="42", root_run_id="run-1", conversation_key="telegram:42")
OTHER_RUN = LedgerScope(platform="telegram", chat_id="42", root_run_id="run-2", conversation_key="telegram:42")
OTHER_CHAT = LedgerScope(platform="telegram", chat_id="43", root_run_id="run-1", conversation_key="telegram:43")
OTHER_PLATFORM = LedgerScope(platform="slack", chat_id="42", root_run_id="run-1", conversation_key="slack:42")


@pytest.fixture
async def sessions(db_url):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


def test_an_entry_with_text_records_its_length_and_hash_and_keeps_a_known_message_id():
    entry = LedgerEntry(0, LedgerState.PENDING, message_id="77", error="earlier failure")
    sent = entry.with_text(LedgerState.SENT, "héllo", final=True)
    assert (sent.state, sent.message_id, sent.text_length, sent.text_sha256, sent.final, sent.error) == (
        LedgerState.SENT,
        "77",
        5,
        sha256("héllo"),
        True,
        None,
    )
    assert entry.with_text(LedgerState.SENDING, "x", final=False, message_id="78").message_id == "78"
    assert sent.landed("héllo") and not sent.landed("hello")
    assert not entry.with_text(LedgerState.UNKNOWN, "héllo", final=True).landed("héllo")  # maybe sent is not landed


def test_a_receipt_says_which_message_of_which_run_and_chat_and_its_state():
    entry = LedgerEntry(2, LedgerState.FAILED, "9", 4, sha256("abcd"), True, "429")
    receipt = entry.receipt(SCOPE)
    assert receipt.model_dump(exclude={"id", "ts"}) == DeliveryReceipt(
        conversation_key="telegram:42",
        root_run_id="run-1",
        platform="telegram",
        chat_id="42",
        segment=2,
        state=LedgerState.FAILED,
        platform_message_id="9",
        text_length=4,
        text_sha256=sha256("abcd"),
        final=True,
        error="429",
    ).model_dump(exclude={"id", "ts"})


async def test_rows_are_kept_per_platform_chat_run_and_segment_and_updated_in_place(sessions):
    receipts: list[DeliveryReceipt] = []

    async def sink(receipt: DeliveryReceipt) -> None:
        receipts.append(receipt)

    ledger = SqlLedger(sessions, sink)
    pending = LedgerEntry(0, LedgerState.PENDING)
    await ledger.record(SCOPE, pending)
    sent = pending.with_text(LedgerState.SENT, "hello", final=False, message_id="m-1")
    await ledger.record(SCOPE, sent)
    failed = LedgerEntry(1, LedgerState.FAILED, error="x" * 600, reapply_at=1234.5)
    await ledger.record(SCOPE, failed)
    for scope in (OTHER_RUN, OTHER_CHAT, OTHER_PLATFORM):
        await ledger.record(scope, LedgerEntry(0, LedgerState.SENDING))
    rows = await SqlLedger(sessions).load(SCOPE)
    assert rows == {0: sent, 1: LedgerEntry(1, LedgerState.FAILED, error="x" * 500, reapply_at=1234.5)}
    assert (await ledger.load(OTHER_RUN))[0].state is LedgerState.SENDING
    assert await ledger.load(LedgerScope("telegram", "42", "run-9", "telegram:42")) == {}
    assert [(r.root_run_id, r.chat_id, r.platform, r.segment, r.state) for r in receipts] == [
        ("run-1", "42", "telegram", 0, LedgerState.PENDING),
        ("run-1", "42", "telegram", 0, LedgerState.SENT),
        ("run-1", "42", "telegram", 1, LedgerState.FAILED),
        ("run-2", "42", "telegram", 0, LedgerState.SENDING),
        ("run-1", "43", "telegram", 0, LedgerState.SENDING),
        ("run-1", "42", "slack", 0, LedgerState.SENDING),
    ]


async def test_rows_asked_for_together_share_a_transaction_in_the_order_asked(db_url):  # type: ignore[no-untyped-def]
    """Each stream's row in a transaction of its own held a pooled connection each: at ~17 runs/s on
    PostgreSQL the streams queued for the pool until they timed out, holding the commit meanwhile."""
    import asyncio

    from sqlalchemy import event

    await upgrade(db_url)
    engine = create_engine(db_url)
    commits: list[int] = []
    event.listen(engine.sync_engine, "commit", lambda _conn: commits.append(1))
    try:
        ledger = SqlLedger(session_factory(engine))
        scopes = [LedgerScope("telegram", str(chat), f"run-{chat}", f"telegram:{chat}") for chat in range(50)]
        pending = [ledger.record(scope, LedgerEntry(0, LedgerState.PENDING)) for scope in scopes]
        sent = [ledger.record(scope, LedgerEntry(0, LedgerState.SENT, "m")) for scope in scopes]
        await asyncio.gather(*pending, *sent)
        assert len(commits) <= 3  # one per wave, not one per row (100 before)
        states = [(await ledger.load(scope))[0].state for scope in scopes]
        assert states == [LedgerState.SENT] * len(scopes)  # the row asked for later wins
    finally:
        await engine.dispose()


async def test_a_row_that_cannot_be_written_fails_its_own_record_only(sessions, monkeypatch):  # type: ignore[no-untyped-def]
    import asyncio

    from agentstream_delivery import ledger as ledger_module

    write_rows = ledger_module._write_rows

    async def refusing(session, rows):  # type: ignore[no-untyped-def]
        if any(scope.chat_id == "bad" for scope, _ in rows):
            raise ValueError("a row the database refuses")
        await write_rows(session, rows)

    monkeypatch.setattr(ledger_module, "_write_rows", refusing)
    ledger = SqlLedger(sessions)
    bad = LedgerScope("telegram", "bad", "run-1", "telegram:bad")
    outcomes = await asyncio.gather(
        ledger.record(SCOPE, LedgerEntry(0, LedgerState.SENT)),
        ledger.record(bad, LedgerEntry(0, LedgerState.SENT)),
        ledger.record(OTHER_CHAT, LedgerEntry(0, LedgerState.SENT)),
        return_exceptions=True,
    )
    assert [type(o) for o in outcomes] == [type(None), ValueError, type(None)]
    assert (await ledger.load(SCOPE))[0].state is LedgerState.SENT
    assert (await ledger.load(OTHER_CHAT))[0].state is LedgerState.SENT


async def test_an_empty_error_is_stored_as_none(sessions):
    ledger = SqlLedger(sessions)
    await ledger.record(SCOPE, LedgerEntry(0, LedgerState.FAILED, error=""))
    assert (await ledger.load(SCOPE))[0].error is None


async def test_a_row_is_stamped_in_utc_whatever_the_host_timezone(sessions, monkeypatch):
    monkeypatch.setenv("TZ", "Etc/GMT-10")  # ten hours east of UTC: a local stamp would look ten hours newer
    time.tzset()
    try:
        await SqlLedger(sessions).record(SCOPE, LedgerEntry(0, LedgerState.SENT))
    finally:
        monkeypatch.undo()
        time.tzset()
    async with sessions() as session:
        stamped = (await session.scalars(select(DeliveryLedger.updated_at))).one()
    assert abs(stamped.replace(tzinfo=UTC) - datetime.now(UTC)) < timedelta(minutes=5)


async def test_the_memory_ledger_keeps_rows_per_scope_and_publishes_receipts():
    receipts: list[DeliveryReceipt] = []

    async def sink(receipt: DeliveryReceipt) -> None:
        receipts.append(receipt)

    ledger = MemoryLedger(sink)
    await ledger.record(SCOPE, LedgerEntry(0, LedgerState.SENT, "1"))
    await ledger.record(OTHER_RUN, LedgerEntry(0, LedgerState.PENDING))
    assert await ledger.load(SCOPE) == {0: LedgerEntry(0, LedgerState.SENT, "1")}
    assert [r.root_run_id for r in receipts] == ["run-1", "run-2"]
    assert await MemoryLedger().load(SCOPE) == {}


async def test_receipts_are_published_in_order_and_a_failed_publish_does_not_stop_the_rest():
    import asyncio

    queue = ReceiptQueue()
    published: list[int] = []

    def publish(receipt: DeliveryReceipt) -> asyncio.Future[None]:
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if receipt.segment == 1:
            ack.set_exception(RuntimeError("kafka down"))
        else:
            published.append(receipt.segment)
            ack.set_result(None)
        return ack

    for segment in range(3):
        await queue.put(LedgerEntry(segment, LedgerState.SENT).receipt(SCOPE))
    drain = asyncio.create_task(queue.drain(publish, structlog.get_logger("test")))
    await asyncio.wait_for(queue.published(), 5)
    await queue.put(LedgerEntry(3, LedgerState.SENT).receipt(SCOPE))  # the failure did not stop the drain
    await asyncio.wait_for(queue.published(), 5)
    drain.cancel()
    assert published == [0, 2, 3] and queue.pending() == 0


async def test_receipts_queued_while_a_wave_is_acked_go_out_together_not_one_ack_at_a_time():
    """At ~17 runs/s a broker round trip per receipt fell behind and the queue grew without bound."""
    import asyncio

    queue = ReceiptQueue()
    handed: list[int] = []
    acks: list[asyncio.Future[None]] = []

    def publish(receipt: DeliveryReceipt) -> asyncio.Future[None]:
        handed.append(receipt.segment)
        acks.append(asyncio.get_running_loop().create_future())
        return acks[-1]

    for segment in range(100):
        await queue.put(LedgerEntry(segment, LedgerState.SENT).receipt(SCOPE))
    drain = asyncio.create_task(queue.drain(publish, structlog.get_logger("test")))
    for _ in range(5):
        await asyncio.sleep(0)
    assert handed == list(range(100)) and queue.pending() == 100  # handed over, none acked yet
    for segment in range(100, 150):  # queued while the first wave waits for its acks
        await queue.put(LedgerEntry(segment, LedgerState.SENT).receipt(SCOPE))
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(handed) == 100  # in order: the next wave only once this one is acked
    for ack in acks:
        ack.set_result(None)
    for _ in range(5):
        await asyncio.sleep(0)
    assert handed == list(range(150)) and queue.pending() == 50
    drain.cancel()


async def test_a_write_waits_out_a_sqlite_locked_past_its_busy_timeout(tmp_path):
    """Five processes on one SQLite: a writer may hold the lock past the busy timeout (5 s; 0.1 s
    here). The stream's ledger write waits and writes again instead of crashing the stream."""
    import asyncio
    import sqlite3

    from sqlalchemy import event

    path = tmp_path / "ledger.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade(url)
    engine = create_engine(url)

    @event.listens_for(engine.sync_engine, "connect")
    def _short_busy_timeout(dbapi_conn, _record):  # type: ignore[no-untyped-def]
        dbapi_conn.cursor().execute("PRAGMA busy_timeout=100")

    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process's write lock
    try:
        ledger = SqlLedger(session_factory(engine))
        write = asyncio.create_task(ledger.record(SCOPE, LedgerEntry(0, LedgerState.PENDING, text_length=2)))
        await asyncio.sleep(0.6)  # several busy timeouts
        assert not write.done()
        other.execute("COMMIT")
        await asyncio.wait_for(write, 10)
        assert (await ledger.load(SCOPE))[0].state == LedgerState.PENDING
    finally:
        other.close()
        await engine.dispose()
