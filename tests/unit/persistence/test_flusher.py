"""Which flush failures are the run's own (dead-letter it) and which the database's (retry)."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select
from sqlalchemy.exc import DataError, IntegrityError, InterfaceError, OperationalError, StatementError

from agentstream.contracts import ReplyTarget, RunFinished, RunQueued, ToolCall, ToolResult
from agentstream.db import Run, create_engine, session_factory, upgrade
from agentstream.observability import NotReady
from agentstream_persistence import flusher as flusher_module
from agentstream_persistence.buffers import BufferSet, Origin
from agentstream_persistence.flusher import (
    MAX_LETTER_CHARS,
    Failed,
    Flusher,
    Stored,
    Unstorable,
    is_permanent,
    run_dead_letter,
)


@pytest.mark.parametrize(
    ("err", "permanent"),
    [
        (DataError("INSERT", {}, Exception("value too long for type character varying(64)")), True),
        (IntegrityError("INSERT", {}, Exception("null value in column")), True),
        (RecursionError("maximum recursion depth exceeded"), True),
        (ValueError("run r is not finished"), True),
        (StatementError("could not bind", "INSERT", {}, TypeError("bad type")), True),
        (OperationalError("connect", {}, Exception("connection refused")), False),
        (InterfaceError("connect", {}, Exception("connection already closed")), False),
        (TimeoutError(), False),
        (ConnectionResetError(), False),
        (OSError("network unreachable"), False),
    ],
)
def test_data_errors_are_permanent_and_connection_errors_transient(err: BaseException, permanent: bool):
    assert is_permanent(err) is permanent


def buffer(arguments: str = "{}", run_id: str = "r1"):  # type: ignore[no-untyped-def]
    ids = {"run_id": run_id, "root_run_id": run_id, "conversation_key": "web:c"}
    buffers = BufferSet()
    buffers.add(
        RunQueued(**ids, seq=0, assistant_id="a", reply_target=ReplyTarget(platform="web", chat_id="c"), text="hi"),
        Origin(1, 40),
    )
    buffers.add(ToolCall(**ids, seq=1, call_id="c1", tool="t", arguments=arguments))
    buf = buffers.add(RunFinished(**ids, seq=2, status="completed", text="done"))
    assert buf is not None
    return buf


def test_one_dead_letter_per_run_carries_its_events_and_where_they_start():
    letter = run_dead_letter(buffer(), "p.events", "run could not be stored: DataError: x", "persistence")
    assert (letter.source_topic, letter.source_partition, letter.source_offset, letter.key) == (
        "p.events",
        1,
        40,
        "web:c",
    )
    body = json.loads(letter.raw_value)
    assert body["root_run_id"] == "r1" and "truncated" not in body
    assert [(e["seq"], e["type"]) for e in body["events"]] == [(0, "run.queued"), (1, "tool.call"), (2, "run.finished")]


def test_a_huge_run_is_listed_not_copied():
    letter = run_dead_letter(buffer(json.dumps({"x": "y" * MAX_LETTER_CHARS})), "p.events", "e", "persistence")
    body = json.loads(letter.raw_value)
    assert body["truncated"] is True and len(letter.raw_value) <= MAX_LETTER_CHARS
    assert [e["type"] for e in body["events"]] == ["run.queued", "tool.call", "run.finished"]


class BrokenSessions:
    """A session factory whose sessions fail the way a database (or its data) does."""

    def __init__(self, err: BaseException) -> None:
        self.err = err

    def __call__(self):  # type: ignore[no-untyped-def]
        raise self.err


def counted(registry: CollectorRegistry, outcome: str) -> float:
    return registry.get_sample_value("agentstream_persistence_flushes_total", {"outcome": outcome}) or 0.0


def waiting_gauge(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("agentstream_persistence_flush_retries")


async def test_a_database_failure_is_a_failed_attempt_that_waits_and_holds_readiness():
    registry = CollectorRegistry()
    flusher = Flusher(BrokenSessions(OperationalError("connect", {}, Exception("connection refused"))), registry)  # type: ignore[arg-type]
    outcome = await flusher.attempt(buffer())
    assert isinstance(outcome, Failed) and outcome.reason.startswith(
        "OperationalError: (builtins.Exception) connection"
    )
    assert counted(registry, "error") == 1 and flusher.waiting == {}
    assert await flusher.ready() is True
    flusher.wait("r1", outcome.reason)
    flusher.wait("r2", "later error")
    assert waiting_gauge(registry) == 2
    with pytest.raises(NotReady, match=r"^2 finished run\(s\) not stored yet, retrying: OperationalError"):
        await flusher.ready()
    flusher.dead_lettered("r1")
    assert flusher.waiting == {"r2": "later error"} and counted(registry, "dead_letter") == 1


async def test_the_runs_own_data_is_unstorable_and_not_counted_as_a_database_error():
    registry = CollectorRegistry()
    flusher = Flusher(BrokenSessions(DataError("INSERT", {}, Exception("value too long"))), registry)  # type: ignore[arg-type]
    outcome = await flusher.attempt(buffer())
    assert isinstance(outcome, Unstorable) and "value too long" in outcome.reason
    assert counted(registry, "error") == 0


async def test_a_stored_run_leaves_the_waiting_list_and_is_counted(db_url):
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        registry = CollectorRegistry()
        flusher = Flusher(session_factory(engine), registry, redact=lambda text: text.upper())
        flusher.wait("r1", "earlier failure")
        outcome = await flusher.attempt(buffer())
        assert isinstance(outcome, Stored) and outcome.rows.run["root_run_id"] == "r1"
        assert outcome.rows.run["text"] == "DONE"  # stored through the redaction it was given
        assert flusher.waiting == {} and counted(registry, "ok") == 1 and waiting_gauge(registry) == 0
        assert await flusher.ready() is True
    finally:
        await engine.dispose()


async def test_without_a_redaction_text_is_stored_raw():
    flusher = Flusher(BrokenSessions(OperationalError("x", {}, Exception("down"))), CollectorRegistry())  # type: ignore[arg-type]
    assert flusher.redact("secret text") == "secret text"


def test_a_dead_letter_keeps_non_ascii_text_and_lists_each_events_type_seq_and_id():
    buf = buffer(json.dumps({"q": "héllo ✓"}, ensure_ascii=False))
    letter = run_dead_letter(buf, "p.events", "e", "persistence")
    assert "héllo ✓" in letter.raw_value
    huge = buffer(json.dumps({"x": "é" * MAX_LETTER_CHARS}, ensure_ascii=False))
    body = json.loads(run_dead_letter(huge, "p.events", "e", "persistence").raw_value)
    assert [set(e) for e in body["events"]] == [{"type", "seq", "id"}] * 3
    assert [e["seq"] for e in body["events"]] == [0, 1, 2]


def test_a_dead_letter_of_a_run_read_from_nowhere_has_no_source_coordinates():
    buf = buffer()
    buf.origin = None
    letter = run_dead_letter(buf, "p.events", "e", "persistence")
    assert (letter.source_partition, letter.source_offset) == (None, None)


def test_a_tool_call_without_its_result_is_still_in_the_dead_letter():
    from agentstream_persistence.buffers import RunBuffer

    buf = RunBuffer("r1", "web:c")
    buf.add(
        ToolCall(run_id="r1", root_run_id="r1", conversation_key="web:c", seq=0, call_id="c", tool="t", arguments="{}")
    )
    body = json.loads(run_dead_letter(buf, "p.events", "e", "persistence").raw_value)
    assert [e["type"] for e in body["events"]] == ["tool.call"]


async def test_forgetting_a_run_that_was_not_waiting_is_harmless(db_url):
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        flusher = Flusher(session_factory(engine), CollectorRegistry())
        assert isinstance(await flusher.attempt(buffer()), Stored)  # never waited
        flusher.dead_lettered("unknown")
        assert flusher.waiting == {}
    finally:
        await engine.dispose()


def test_a_tool_call_and_its_result_are_both_in_the_dead_letter():
    from agentstream_persistence.buffers import RunBuffer

    ids = {"run_id": "r1", "root_run_id": "r1", "conversation_key": "web:c"}
    buf = RunBuffer("r1", "web:c")
    buf.add(ToolCall(**ids, seq=0, call_id="c", tool="t", arguments="{}"))
    buf.add(ToolResult(**ids, seq=1, call_id="c", tool="t", ok=True, content="42"))
    body = json.loads(run_dead_letter(buf, "p.events", "e", "persistence").raw_value)
    assert [(e["type"], e["seq"]) for e in body["events"]] == [("tool.call", 0), ("tool.result", 1)]


def test_a_letter_of_exactly_the_limit_is_kept_whole():
    small = len(run_dead_letter(buffer("y"), "p.events", "e", "persistence").raw_value)
    at_limit = run_dead_letter(buffer("y" * (1 + MAX_LETTER_CHARS - small)), "p.events", "e", "persistence")
    assert len(at_limit.raw_value) == MAX_LETTER_CHARS
    assert "truncated" not in json.loads(at_limit.raw_value)
    over = run_dead_letter(buffer("y" * (2 + MAX_LETTER_CHARS - small)), "p.events", "e", "persistence")
    assert json.loads(over.raw_value)["truncated"] is True


def test_a_truncated_letter_keeps_a_non_ascii_run_id_as_written():
    huge = buffer(json.dumps({"x": "y" * MAX_LETTER_CHARS}), run_id="réunion-✓")
    letter = run_dead_letter(huge, "p.events", "e", "persistence")
    assert '"root_run_id": "réunion-✓"' in letter.raw_value
    assert json.loads(letter.raw_value)["truncated"] is True


async def test_a_flush_that_hangs_is_given_up_after_the_flush_timeout_as_a_failed_attempt(monkeypatch):
    async def hang(*_args: object) -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(flusher_module, "write_run", hang)
    monkeypatch.setattr(flusher_module, "FLUSH_TIMEOUT_S", 0.05)
    registry = CollectorRegistry()
    outcome = await Flusher(BrokenSessions(RuntimeError("unused")), registry).attempt(buffer())  # type: ignore[arg-type]
    assert isinstance(outcome, Failed) and outcome.reason.startswith("TimeoutError")
    assert counted(registry, "error") == 1


def test_every_flush_outcome_is_exported_at_zero_from_the_start():
    registry = CollectorRegistry()
    Flusher(BrokenSessions(RuntimeError("unused")), registry)  # type: ignore[arg-type]
    for outcome in ("ok", "error", "dead_letter"):
        assert registry.get_sample_value("agentstream_persistence_flushes_total", {"outcome": outcome}) == 0.0


async def test_each_attempt_is_timed_in_the_flush_seconds_buckets_whatever_its_outcome():
    registry = CollectorRegistry()
    flusher = Flusher(BrokenSessions(OperationalError("connect", {}, Exception("refused"))), registry)  # type: ignore[arg-type]
    await flusher.attempt(buffer())
    assert registry.get_sample_value("agentstream_persistence_flush_seconds_count") == 1
    # A failure at once is in the 15 s bucket however slow the machine (not necessarily in the 5 ms one).
    for le in ("15.0", "+Inf"):
        assert registry.get_sample_value("agentstream_persistence_flush_seconds_bucket", {"le": le}) == 1


def unfinished(run_id: str):  # type: ignore[no-untyped-def]
    buffers = BufferSet()
    ids = {"run_id": run_id, "root_run_id": run_id, "conversation_key": "web:c"}
    buf = buffers.add(
        RunQueued(**ids, seq=0, assistant_id="a", reply_target=ReplyTarget(platform="web", chat_id="c"), text="hi")
    )
    assert buf is not None
    return buf


async def test_runs_flushed_together_share_one_transaction_and_a_bad_one_is_isolated(db_url):
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        sessions = session_factory(engine)
        opened = 0

        def counting():  # type: ignore[no-untyped-def]
            nonlocal opened
            opened += 1
            return sessions()

        registry = CollectorRegistry()
        flusher = Flusher(counting, registry)  # type: ignore[arg-type]
        outcomes = await flusher.attempt_many([buffer(run_id="b1"), buffer(run_id="b2"), buffer(run_id="b3")])
        assert [type(o) for o in outcomes] == [Stored] * 3 and opened == 1  # one transaction for the three
        assert counted(registry, "ok") == 3
        # A run that cannot be turned into rows fails the batch: each is then tried alone, and only it fails.
        opened = 0
        outcomes = await flusher.attempt_many([buffer(run_id="c1"), unfinished("c2"), buffer(run_id="c3")])
        assert [type(o) for o in outcomes] == [Stored, Unstorable, Stored]
        assert opened == 2  # the good two, one each (the bad one failed before any session)
        async with sessions() as session:
            stored = set(await session.scalars(select(Run.run_id)))
        assert stored == {"b1", "b2", "b3", "c1", "c3"}
    finally:
        await engine.dispose()


async def test_runs_written_together_fail_together_when_the_database_fails_and_are_not_tried_one_by_one():
    # Each run tried alone would meet the same database: one more failed transaction (up to one flush
    # timeout) per run, while every run that finished meanwhile waited behind them.
    opened = 0

    def away():  # type: ignore[no-untyped-def]
        nonlocal opened
        opened += 1
        raise OperationalError("connect", {}, Exception("database is locked"))

    registry = CollectorRegistry()
    flusher = Flusher(away, registry)  # type: ignore[arg-type]
    outcomes = await flusher.attempt_many([buffer(run_id="d1"), buffer(run_id="d2"), buffer(run_id="d3")])
    assert [type(o) for o in outcomes] == [Failed] * 3 and opened == 1
    assert all(o.reason.startswith("OperationalError") and "database is locked" in o.reason for o in outcomes)
    assert counted(registry, "error") == 3 and counted(registry, "ok") == 0
    assert registry.get_sample_value("agentstream_persistence_flush_seconds_count") == 3
