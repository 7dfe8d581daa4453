"""The visible stream a finished buffer archives (`rows.event_rows`) and a replay's buffer (pure, no database)."""

from __future__ import annotations

from agentstream.contracts import (
    ChatMessage,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunHeartbeat,
    RunQueued,
    RunStarted,
    SegmentBreak,
    StepStarted,
    ToolCall,
    ToolResult,
)
from agentstream_persistence.buffers import BufferSet, Origin, RunBuffer
from agentstream_persistence.rows import rows_for

TARGET = ReplyTarget(platform="memory", chat_id="c1")
SECRET = "sk-" + "a" * 24


def ids(seq: int, run_id: str = "r1", **kw: object) -> dict[str, object]:
    return {"run_id": run_id, "root_run_id": "r1", "conversation_key": "memory:c1", "seq": seq, **kw}


def started(**kw: object) -> RunStarted:
    return RunStarted(
        **ids(1),
        assistant_id="a",
        connector_id="demo",
        reply_target=TARGET,
        input=[ChatMessage(role="user", content="hi")],
        **kw,
    )


def run_with_tools() -> list[object]:
    child = {"run_id": "child", "parent_run_id": "r1", "depth": 1}
    return [
        RunQueued(**ids(0), assistant_id="a", reply_target=TARGET, text="hi"),
        started(),
        MessageStarted(**ids(2), message_id="m1"),
        MessageDelta(**ids(3), message_id="m1", text="Let me "),
        MessageDelta(**ids(4), message_id="m1", text="look."),
        MessageCompleted(**ids(5), message_id="m1", text="Let me look."),
        StepStarted(**ids(6), step_id="s", step_type="tool"),
        ToolCall(**ids(7), call_id="c1", tool="calculator", arguments=f'{{"key": "{SECRET}"}}'),
        RunHeartbeat(**ids(8)),
        ToolResult(**ids(9), call_id="c1", tool="calculator", ok=True, content="42"),
        SegmentBreak(**ids(10)),
        Notice(**ids(11), text=f"key {SECRET}", reply_target=TARGET),
        ToolCall(**ids(12, **child), call_id="c2", tool="clock", arguments="{}"),
        MessageStarted(**ids(13), message_id="m2"),
        MessageDelta(**ids(14), message_id="m2", text="half an "),
        MessageDelta(**ids(15), message_id="m2", text="answer"),
        RunFinished(**ids(16), status="interrupted", reason="user", text="", data={"hook": 1}),
    ]


def buffered(events: list[object]) -> RunBuffer:
    buffers = BufferSet()
    for i, ev in enumerate(events):
        buffers.add(ev, Origin(0, i))  # type: ignore[arg-type]
    buf = buffers.get("r1")
    assert buf is not None
    return buf


def test_the_visible_stream_is_archived_in_seq_order_without_what_a_chat_never_shows():
    events = run_with_tools()
    buf = buffered(events[:-1] + events[2:12] + events[-1:])  # a re-read stretch: archived once
    rows = rows_for(buf, redact=lambda t: t.replace(SECRET, "***")).events
    assert [(r["seq"], r["type"]) for r in rows] == [
        (1, "run.started"),
        (2, "message.started"),
        (5, "message.completed"),  # its deltas only led up to this text
        (7, "tool.call"),
        (10, "segment.break"),
        (11, "notice"),
        (12, "tool.call"),
        (13, "message.started"),
        (14, "message.delta"),  # never completed: one delta with all it showed
        (16, "run.finished"),
    ]
    by_seq = {r["seq"]: r["event"] for r in rows}
    assert by_seq[1]["input"] == [] and by_seq[7]["arguments"] == "{}"  # neither is shown in a chat
    assert by_seq[11]["text"] == "key ***" and by_seq[14]["text"] == "half an answer"
    assert by_seq[12]["run_id"] == "child" and by_seq[16]["data"] == {}
    assert {r["root_run_id"] for r in rows} == {"r1"}


def test_a_replay_is_marked_and_a_run_that_never_started_archives_nothing():
    finish = RunFinished(**ids(2), status="completed", text="hi")
    assert buffered([started(replay_of="orig"), finish]).replay
    assert not buffered([started(), finish]).replay
    queued = RunQueued(**ids(0), assistant_id="a", reply_target=TARGET, text="hi")
    assert rows_for(buffered([queued, finish])).events == []
