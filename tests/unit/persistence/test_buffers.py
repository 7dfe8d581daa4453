"""Buffers per root run and the rows a finished buffer becomes (pure, no database)."""

from __future__ import annotations

import pytest

from agentstream.contracts import (
    ChatMessage,
    MessageCompleted,
    MessageDelta,
    Notice,
    ReplyTarget,
    RunFinished,
    RunHeartbeat,
    RunQueued,
    RunStarted,
    ToolCall,
    ToolResult,
    Usage,
)
from agentstream_persistence.buffers import BufferSet, Origin, RunBuffer, ToolExchange
from agentstream_persistence.rows import rows_for, tool_summary

KEY = "memory:c1"
TARGET = ReplyTarget(platform="memory", chat_id="c1")


def ids(seq: int, run_id: str = "r1", **kw: object) -> dict[str, object]:
    return {"run_id": run_id, "root_run_id": "r1", "conversation_key": KEY, "seq": seq, **kw}


def full_run() -> list[object]:
    return [
        RunQueued(**ids(0), assistant_id="default", reply_target=TARGET, text="calculate 6*7", user_id="u1"),
        RunStarted(
            **ids(1),
            assistant_id="default",
            connector_id="demo",
            reply_target=TARGET,
            user_id="u1",
            session_id="s1",
            input=[ChatMessage(role="user", content="calculate 6*7")],
        ),
        MessageDelta(**ids(2), message_id="m1", text="Let me"),
        MessageCompleted(**ids(3), message_id="m1", text=""),
        ToolCall(**ids(4), call_id="c1", tool="calculator", arguments='{"expression":"6*7"}'),
        ToolResult(**ids(5), call_id="c1", tool="calculator", ok=True, content="42"),
        ToolCall(**ids(6, run_id="child", parent_run_id="r1", depth=1), call_id="c2", tool="clock", arguments="{}"),
        MessageCompleted(**ids(7, run_id="child", parent_run_id="r1", depth=1), message_id="m2", text="noon"),
        MessageCompleted(**ids(8), message_id="m3", text="6*7 = 42"),
        RunFinished(
            **ids(9),
            status="completed",
            text="6*7 = 42",
            duration_ms=12.5,
            usage=Usage(prompt_tokens=10, completion_tokens=5, llm_calls=2),
        ),
    ]


def buffered(events: list[object]) -> RunBuffer:
    buffers = BufferSet()
    for i, ev in enumerate(events):
        buffers.add(ev, Origin(0, 100 + i))  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None
    return buf


def test_children_share_the_root_buffer_and_results_pair_with_calls():
    buf = buffered(full_run())
    assert buf.started is not None and buf.queued is not None and buf.finished is not None
    assert [m.message_id for m in buf.assistant] == ["m1", "m2", "m3"]
    assert [(t.call.call_id, t.result.content if t.result else None) for t in buf.tools] == [("c1", "42"), ("c2", None)]


def test_re_read_events_are_applied_once():
    events = full_run()
    buf = buffered(events[:9] + events[3:9] + events[9:])
    assert len(buf.assistant) == 3 and len(buf.tools) == 2


def test_only_run_events_worth_storing_open_a_buffer():
    buffers = BufferSet()
    assert buffers.add(MessageDelta(**ids(2), message_id="m", text="x")) is None
    assert buffers.add(RunHeartbeat(**ids(3))) is None
    assert buffers.add(Notice(**ids(0), text="bad message", reply_target=TARGET)) is None
    assert len(buffers) == 0


def test_oldest_origin_is_the_first_event_of_the_oldest_open_run():
    buffers = BufferSet()
    buffers.add(RunQueued(**ids(0), assistant_id="a", reply_target=TARGET), Origin(1, 40))
    buffers.add(MessageCompleted(**ids(3), message_id="m", text="t"), Origin(1, 47))
    other = {"run_id": "r2", "root_run_id": "r2", "conversation_key": KEY}
    buffers.add(RunQueued(**other, seq=0, assistant_id="a", reply_target=TARGET), Origin(1, 45))
    assert buffers.oldest_origin(1) == 40
    assert buffers.oldest_origin(0) is None
    buffers.discard("r1")
    assert buffers.oldest_origin(1) == 45


def test_rows_of_a_finished_run():
    rows = rows_for(buffered(full_run()))
    assert rows.run | {"started_at": None, "finished_at": None} == {
        "run_id": "r1",
        "root_run_id": "r1",
        "parent_run_id": None,
        "conversation_key": KEY,
        "session_id": "s1",
        "assistant_id": "default",
        "connector_id": "demo",
        "user_id": "u1",
        "status": "completed",
        "error": None,
        "reason": None,
        "text": "6*7 = 42",
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "llm_calls": 2,
        "duration_ms": 12.5,
        "started_at": None,
        "finished_at": None,
        "tenant_id": None,
    }
    assert [(m["seq"], m["part"], m["role"], m["run_id"], m["content"]) for m in rows.messages] == [
        (1, 0, "user", "r1", "calculate 6*7"),  # from run.started, the queued copy is not repeated
        (4, 0, "tool", "r1", 'calculator({"expression": "6*7"}) → 42'),
        (6, 0, "tool", "child", "clock({}) → (no result)"),
        (7, 0, "assistant", "child", "noon"),
        (8, 0, "assistant", "r1", "6*7 = 42"),  # the empty tool-only turn (seq 3) is not stored
    ]
    assert rows.messages[1]["name"] == "calculator" and rows.messages[1]["tool_call_id"] == "c1"
    assert rows.conversation["platform"] == "memory" and rows.conversation["chat_id"] == "c1"
    assert rows.conversation["session_id"] == "s1"


def test_user_input_falls_back_to_queued_text_and_target_to_the_key():
    events = full_run()
    rows = rows_for(buffered([events[0], events[-1]]))
    assert [(m["seq"], m["role"], m["content"]) for m in rows.messages] == [(0, "user", "calculate 6*7")]
    assert rows.run["assistant_id"] == "default" and rows.run["connector_id"] is None
    thread_key = {"run_id": "r9", "root_run_id": "r9", "conversation_key": "slack:C1:T7", "seq": 5}
    lonely = BufferSet()
    buf = lonely.add(RunFinished(**thread_key, status="failed", error="boom", reason="runner_lost"))
    assert buf is not None
    rows = rows_for(buf)
    assert rows.messages == [] and rows.run["status"] == "failed" and rows.run["reason"] == "runner_lost"
    assert (rows.conversation["platform"], rows.conversation["chat_id"], rows.conversation["thread_id"]) == (
        "slack",
        "C1",
        "T7",
    )


def test_unfinished_buffer_has_no_rows():
    with pytest.raises(ValueError):
        rows_for(buffered(full_run()[:3]))


def test_tool_summary_variants():
    call = ToolCall(**ids(4), call_id="c", tool="calculator", arguments="not json")
    failed = ToolResult(**ids(5), call_id="c", tool="calculator", ok=False, error="division by zero")
    assert tool_summary(ToolExchange(call, failed)) == "calculator(not json) → error: division by zero"
    long = ToolResult(**ids(5), call_id="c", tool="calculator", ok=True, content="x" * 500)
    summary = tool_summary(ToolExchange(call, long))
    assert summary.endswith("…") and len(summary) < 250


def test_skip_history_records_the_run_but_stores_no_messages():
    events = full_run()
    events[1] = events[1].model_copy(update={"store_history": False})  # type: ignore[attr-defined]
    rows = rows_for(buffered(events))
    assert rows.run["status"] == "completed" and rows.run["text"] == "6*7 = 42"
    assert rows.messages == []
