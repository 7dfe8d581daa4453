"""Pure parts of resume bookkeeping: buffered steps and partial text, the checkpoint rows,
the lost-run ending, the stale check and the offset commit points."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentstream.contracts import (
    ChatMessage,
    CheckpointStart,
    FinishReason,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunHeartbeat,
    RunQueued,
    RunStarted,
    StepCompleted,
    ToolHeartbeat,
    Usage,
)
from agentstream.kafka.commits import CommitPoints
from agentstream_persistence.buffers import BufferSet, BufferState, Origin
from agentstream_persistence.rows import rows_for, start_info
from agentstream_persistence.watchdog import lost_run_finished

KEY = "memory:c1"
TARGET = ReplyTarget(platform="memory", chat_id="c1")
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
USER = ChatMessage(role="user", content="tell me a story")


def ids(seq: int, root: str = "r1") -> dict[str, object]:
    return {"run_id": root, "root_run_id": root, "conversation_key": KEY, "seq": seq, "ts": T0 + timedelta(seconds=seq)}


def interrupted_run(status: str = "interrupted") -> list[object]:
    first = ChatMessage(role="assistant", content="Once")
    return [
        RunStarted(
            **ids(1),
            assistant_id="default",
            connector_id="fake",
            reply_target=TARGET,
            user_id="u1",
            session_id="s1",
            input=[USER],
        ),
        MessageStarted(**ids(2), message_id="m1"),
        MessageCompleted(**ids(3), message_id="m1", text="Once"),
        StepCompleted(
            **ids(4),
            step_id="llm-1",
            step_type="llm",
            input={"turn": 1},
            output={"text": "Once", "usage": {"prompt_tokens": 7, "completion_tokens": 1, "llm_calls": 1}},
            memory=[USER, first],
        ),
        MessageStarted(**ids(5), message_id="m2"),
        MessageDelta(**ids(6), message_id="m2", text="upon "),
        MessageDelta(**ids(7), message_id="m2", text="a time"),
        RunHeartbeat(**ids(8)),
        RunFinished(
            **ids(9),
            status=status,
            reason="user",
            text="Once",
            usage=Usage(prompt_tokens=7, completion_tokens=1, llm_calls=1),
        ),
    ]


def test_partial_text_and_steps_become_messages_and_a_checkpoint():
    buffers = BufferSet()
    for i, ev in enumerate(interrupted_run()):
        buffers.add(ev, Origin(0, 10 + i))  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None and buf.state is BufferState.FINISHED and buf.max_seq == 9
    rows = rows_for(buf)
    assert [(m["role"], m["content"], m["seq"]) for m in rows.messages] == [
        ("user", "tell me a story", 1),
        ("assistant", "Once", 3),
        ("assistant", "upon a time", 6),
    ]
    assert rows.checkpoint is not None
    cp = rows.checkpoint.checkpoint
    assert (cp["status"], cp["reason"], cp["last_seq"], cp["usage"]["llm_calls"]) == ("interrupted", "user", 9, 1)
    assert cp["start"]["user_id"] == "u1" and cp["start"]["session_id"] == "s1"
    assert cp["start"]["reply_target"]["chat_id"] == "c1" and cp["start"]["input"][0]["content"] == USER.content
    # The column keeps the JSON object it always had: these keys, nothing added.
    assert set(cp["start"]) == {
        "assistant_id",
        "connector_id",
        "user_id",
        "tenant_id",
        "session_id",
        "reply_target",
        "input",
        "text",
    }
    assert CheckpointStart.model_validate(cp["start"]) == start_info(buf)
    [step] = rows.checkpoint.steps
    assert (step["step_id"], step["seq"], [m["content"] for m in step["memory"]]) == (
        "llm-1",
        4,
        ["tell me a story", "Once"],
    )


def test_a_completed_run_has_no_checkpoint():
    buffers = BufferSet()
    for ev in interrupted_run(status="completed"):
        buffers.add(ev)  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None and rows_for(buf).checkpoint is None and rows_for(buf).completed


def test_a_re_read_delta_is_not_counted_twice():
    buffers = BufferSet()
    events = interrupted_run()
    for ev in [*events[:7], events[6], *events[7:]]:
        buffers.add(ev)  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None
    assert [m.text for m in buf.incomplete_messages()] == ["upon a time"]


def test_silent_open_runs_are_stale_and_end_as_runner_lost():
    buffers = BufferSet()
    for ev in interrupted_run()[:-1]:  # no run.finished: the runner died mid-stream
        buffers.add(ev, now=100.0)  # type: ignore[arg-type]
    assert buffers.stale(now=129.0, stale_after_s=30) == []
    [buf] = buffers.stale(now=130.0, stale_after_s=30)
    fin = lost_run_finished(buf, 30, now=T0 + timedelta(seconds=61))
    assert (fin.status, fin.reason, fin.seq, fin.text) == ("failed", FinishReason.RUNNER_LOST, 9, "upon a time")
    assert fin.usage == Usage(prompt_tokens=7, completion_tokens=1, llm_calls=1)
    assert fin.duration_ms == 60_000
    buf.mark_lost()
    assert buffers.stale(now=999.0, stale_after_s=30) == []  # one ending, not one per tick
    buf.reopen()
    assert buffers.stale(now=999.0, stale_after_s=30) == [buf]  # publishing failed: try again
    buffers.add(fin)
    assert buf.state is BufferState.FINISHED and buffers.stale(now=999.0, stale_after_s=30) == []


def test_tool_heartbeats_keep_a_slow_call_fresh_without_moving_the_sequence():
    buffers = BufferSet()
    for ev in interrupted_run()[:-1]:
        buffers.add(ev, now=100.0)  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None
    last_seq, stored = buf.max_seq, len(buf.seen)
    for at in (120.0, 140.0, 160.0):  # the executor, every 20 s, repeating a seq already seen
        buffers.add(ToolHeartbeat(**ids(3), call_id="c1", tool="slow", elapsed_ms=at * 1000), now=at)
    assert buffers.stale(now=189.0, stale_after_s=30) == []
    assert (buf.max_seq, len(buf.seen)) == (last_seq, stored)  # a sign of life, nothing stored
    assert buffers.stale(now=190.0, stale_after_s=30) == [buf]  # the beats stopped: silent again
    # A heartbeat of a run persistence does not hold (already flushed) opens nothing.
    assert buffers.add(ToolHeartbeat(**ids(3, root="gone"), call_id="c", tool="t")) is None


def test_commit_stops_at_the_oldest_unflushed_run():
    buffers, points = BufferSet(), CommitPoints()
    a, b = (
        interrupted_run()[:3],
        [RunStarted(**{**ids(1, "r2")}, assistant_id="default", connector_id="fake", reply_target=TARGET)],
    )
    offset = 0
    for ev in a:
        buffers.add(ev, Origin(0, offset))  # type: ignore[arg-type]
        points.read(0, offset)
        offset += 1
    buffers.add(b[0], Origin(0, offset))
    points.read(0, offset)
    points.read(1, 41)
    assert points.due(buffers.oldest_origin) == {0: 0, 1: 42}  # r1 (first event at 0) holds partition 0
    points.committed({0: 0, 1: 42})
    assert points.due(buffers.oldest_origin) == {}  # nothing moved
    buffers.discard("r1")
    assert points.due(buffers.oldest_origin) == {0: 3}  # now r2's first event is the oldest
    buffers.discard("r2")
    assert points.due(buffers.oldest_origin) == {0: 4}
    points.forget({0})
    assert points.due(buffers.oldest_origin) == {}


def test_a_refused_run_is_marked_so_the_watchdog_does_not_call_it_lost():
    buffers = BufferSet()
    buffers.add(RunQueued(**ids(0), assistant_id="default", reply_target=TARGET, text="hi"), now=0.0)
    buffers.add(Notice(**ids(1), level="error", text="not authorized"), now=0.0)
    [buf] = buffers.stale(now=60.0, stale_after_s=30)
    assert buf.refused and buf.finished is None
