"""Which flush failures are the run's own (dead-letter it) and which the database's (retry)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy.exc import DataError, IntegrityError, InterfaceError, OperationalError, StatementError

from agentstream.contracts import ReplyTarget, RunFinished, RunQueued, ToolCall
from agentstream_persistence.buffers import BufferSet, Origin
from agentstream_persistence.flusher import MAX_LETTER_CHARS, is_permanent, run_dead_letter


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


def buffer(arguments: str = "{}"):  # type: ignore[no-untyped-def]
    ids = {"run_id": "r1", "root_run_id": "r1", "conversation_key": "web:c"}
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
