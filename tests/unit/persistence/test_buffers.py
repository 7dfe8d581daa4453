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


def test_a_notice_before_the_run_started_marks_it_refused_one_after_does_not():
    refused = RunBuffer("r1", KEY)
    refused.add(Notice(**ids(0), text="who are you?"))
    assert refused.refused is True and refused.seen == set()
    shown = RunBuffer("r1", KEY)
    shown.add(full_run()[1])  # type: ignore[arg-type]
    shown.add(Notice(**ids(2), text="working on it"))
    assert shown.refused is False


def test_stream_only_events_are_not_kept_but_steps_and_the_ending_are():
    from agentstream.contracts import MessageStarted, SegmentBreak, StepCompleted

    buf = RunBuffer("r1", KEY)
    buf.add(MessageStarted(**ids(0), message_id="m1"))
    buf.add(SegmentBreak(**ids(1), reason="tool"))
    buf.add(RunHeartbeat(**ids(2)))
    assert buf.seen == set() and buf.max_seq == 2 and buf.partial == {}
    step = StepCompleted(**ids(3), step_id="s1", step_type="llm")
    buf.add(step)
    assert buf.steps == [step] and buf.state.value == "open"
    buf.add(RunFinished(**ids(4), status="completed", text="ok"))
    assert buf.state.value == "finished" and buf.seen == {3, 4}


def test_an_incomplete_message_keeps_only_its_answer_text_with_the_first_deltas_ids():
    from agentstream.contracts import DeltaKind

    buf = RunBuffer("r1", KEY)
    first = MessageDelta(**ids(0), message_id="m1", text="Hel")
    buf.add(first)
    buf.add(MessageDelta(**ids(1), message_id="m1", text="(thinking)", kind=DeltaKind.THINKING))
    buf.add(MessageDelta(**ids(2), message_id="m1", text="lo"))
    buf.add(MessageDelta(**ids(3), message_id="m2", text="only thoughts", kind=DeltaKind.THINKING))
    [merged] = buf.incomplete_messages()
    assert (merged.text, merged.id, merged.seq, merged.message_id) == ("Hello", first.id, 0, "m1")


def test_a_result_goes_to_the_latest_waiting_call_with_its_id():
    buf = RunBuffer("r1", KEY)
    for seq in (0, 1):  # a retried call reuses its id
        buf.add(ToolCall(**ids(seq), call_id="c1", tool="t", arguments="{}"))
    buf.add(ToolCall(**ids(2), call_id="c2", tool="t", arguments="{}"))
    buf.add(ToolResult(**ids(3), call_id="c1", tool="t", ok=True, content="second"))
    buf.add(ToolResult(**ids(4), call_id="c1", tool="t", ok=True, content="first"))
    buf.add(ToolResult(**ids(5), call_id="zz", tool="t", ok=True, content="nobody's"))
    assert [(e.call.seq, e.result.content if e.result else None) for e in buf.tools] == [
        (0, "first"),
        (1, "second"),
        (2, None),
    ]


def test_a_buffer_remembers_when_its_last_event_was_sent_and_when_it_arrived():
    import time

    buffers = BufferSet()
    queued = full_run()[0]
    buf = buffers.add(queued, Origin(0, 5), now=12.5)  # type: ignore[arg-type]
    assert buf is not None and (buf.last_event_at, buf.last_seen_at) == (queued.ts, 12.5)  # type: ignore[attr-defined]
    before = time.monotonic()
    buf.add(full_run()[1])  # type: ignore[arg-type]
    assert before <= buf.last_seen_at <= time.monotonic()
    buffers.discard("r1")
    buffers.discard("r1")  # forgetting twice is harmless
    assert len(buffers) == 0


def test_buffers_read_from_given_partitions():
    buffers = BufferSet()
    a = buffers.add(RunQueued(**ids(0), assistant_id="x", reply_target=TARGET, text="a"), Origin(0, 1))
    b = buffers.add(
        RunQueued(**{**ids(0), "root_run_id": "r2", "run_id": "r2"}, assistant_id="x", reply_target=TARGET, text="b"),
        Origin(3, 1),
    )
    assert buffers.from_partitions({3}) == [b] and buffers.from_partitions({0, 3}) == [a, b]
    assert buffers.from_partitions({7}) == []


def test_a_repeated_run_queued_of_a_run_done_with_opens_nothing():
    # ingress repeats a run after a crash: same run id, a later offset of `events`
    buffers = BufferSet(done_kept=2)
    for i, ev in enumerate(full_run()):
        buffers.add(ev, Origin(0, 10 + i))  # type: ignore[arg-type]
    buffers.done("r1")
    assert len(buffers) == 0
    queued = full_run()[0]
    assert buffers.add(queued, Origin(0, 50)) is None  # type: ignore[arg-type]
    assert len(buffers) == 0 and buffers.oldest_origin(0) is None  # holds no commit back
    # the same record read again (its partition came back here) is no repeat: its run is re-read whole
    again = buffers.add(queued, Origin(0, 10))  # type: ignore[arg-type]
    assert again is not None and again.queued is not None
    buffers.discard("r1")  # revoked: not done with, so not remembered as such
    # events other than run.queued open a buffer as before: a resumed run starts after its first ending
    assert buffers.add(full_run()[1], Origin(0, 60)) is not None  # type: ignore[arg-type]
    buffers.discard("r1")
    for root in ("x", "y"):  # pushes r1 out of a memory of two
        buffers.add(RunQueued(**{**ids(0), "run_id": root, "root_run_id": root}, assistant_id="a", reply_target=TARGET))
        buffers.done(root)
    assert buffers.add(queued, Origin(0, 70)) is not None  # type: ignore[arg-type]


def test_a_run_queued_behind_a_live_run_is_never_stale_and_is_lost_only_with_it():
    """A run waiting behind its conversation's running run (say, one waiting for an approval) sends
    nothing; while that run beats, the queued one is not `runner_lost`."""
    buffers = BufferSet()
    running = full_run()[:2]  # queued, started: then only heartbeats
    for i, ev in enumerate(running):
        buffers.add(ev, Origin(0, i), now=0.0)  # type: ignore[arg-type]
    behind = RunQueued(**{**ids(0), "run_id": "r2", "root_run_id": "r2"}, assistant_id="x", reply_target=TARGET)
    buffers.add(behind, Origin(0, 5), now=1.0)
    other_chat = RunQueued(
        **{**ids(0), "run_id": "r3", "root_run_id": "r3", "conversation_key": "memory:c2"},
        assistant_id="x",
        reply_target=TARGET,
    )
    buffers.add(other_chat, Origin(0, 6), now=1.0)
    for beat in (20.0, 40.0, 60.0):  # the running run's heartbeats
        buffers.add(RunHeartbeat(**ids(5 + int(beat))), Origin(0, 7), now=beat)
    stale = {b.root_run_id for b in buffers.stale(now=65.0, stale_after_s=30.0)}
    assert stale == {"r3"}  # queued behind nothing live: its runner is lost
    # The running run goes silent: both it and the run behind it are lost with it.
    assert {b.root_run_id for b in buffers.stale(now=95.0, stale_after_s=30.0)} == {"r1", "r2", "r3"}
