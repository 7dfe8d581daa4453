"""The stream state machine's newer transitions: buffer threshold, length splits, think blocks,
tool progress, degradation, stop and runner_lost."""

from __future__ import annotations

from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.platform_ops import Edit, Send, coalesce
from agentstream_delivery.splitting import open_fence, unsplit, utf16_len
from agentstream_delivery.stream_inputs import Break, Degrade, Finish, TextCompleted, TextDelta, Tick, ToolStarted
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel, StreamState

CURSOR = " ▉"


# A platform without limits that matter to these tests: no tool line, no length splits.
STREAMED = {"max_length": 1_000_000, "tool_progress": "off"}


def model(**kw: object) -> StreamModel:
    return StreamModel(Capabilities(**{**STREAMED, "edit_interval": 1.0, **kw}))  # type: ignore[arg-type]


def feed(m: StreamModel, *steps: tuple[float, object]) -> tuple[StreamModel, list[object]]:
    ops: list[object] = []
    for now, inp in steps:
        m, out = transition(m, inp, now)  # type: ignore[arg-type]
        ops.extend(out)
    return m, ops


def finals(ops: list[object]) -> list[str]:
    """The final text of every platform message, by index (the last op on a message wins)."""
    last: dict[int, str] = {}
    for op in ops:
        assert isinstance(op, Send | Edit)
        if op.final:
            last[op.segment] = op.text
    return [last[i] for i in sorted(last)]


# -- cadence -------------------------------------------------------------------------------
def test_early_flush_only_after_buffer_threshold_new_chars():
    m, _ = feed(model(buffer_threshold=10), (0.0, TextDelta("m1", "Hello")))
    m, ops = feed(m, (0.1, TextDelta("m1", " 123456")))  # 7 new chars: below the threshold
    assert ops == [] and m.flush_at == 1.0
    m, ops = feed(m, (0.2, TextDelta("m1", "789")))  # now 10 new chars since the last frame
    assert ops == [Edit(0, "Hello 123456789" + CURSOR, final=False)]


def test_fifty_deltas_per_second_for_ten_seconds_make_at_most_twelve_edits():
    m, ops = model(buffer_threshold=10_000), []
    t = 0.0
    for i in range(500):
        t = i * 0.02
        m, out = transition(m, TextDelta("m1", "word "), t)
        ops += out
        if m.flush_at is not None and m.flush_at <= t:
            m, out = transition(m, Tick(), t)
            ops += out
    edits = [o for o in ops if isinstance(o, Edit)]
    assert 8 <= len(edits) <= 12


# -- length --------------------------------------------------------------------------------
def test_long_stream_is_split_into_messages_under_the_limit_and_joins_back():
    code = "\n".join(f"x = {i}  # comment" for i in range(400))
    answer = "Intro paragraph.\n\n```python\n" + code + "\n```\n\n" + "Closing words. " * 200
    m = model(max_length=4096, measure="utf16")
    steps = [(i * 0.01, TextDelta("m1", answer[i : i + 40])) for i in range(0, len(answer), 40)]
    m, ops = feed(m, *steps, (99.0, Finish("completed", text=answer)))
    texts = finals(ops)
    assert len(texts) >= 2
    assert all(utf16_len(t) <= 4096 for t in texts)
    assert all(open_fence(t) is None for t in texts)
    assert unsplit(texts) == answer
    assert m.state is StreamState.DELIVERED


def test_completed_text_at_once_is_split_too():
    answer = "🚀" * 2200
    _, ops = feed(model(max_length=4096, measure="utf16"), (0.0, Finish("completed", text=answer)))
    assert [utf16_len(t) <= 4096 for t in finals(ops)] == [True, True]
    assert "".join(finals(ops)) == answer


# -- think blocks ------------------------------------------------------------------------
def test_think_block_split_across_deltas_never_shown():
    m, ops = feed(
        model(),
        (0.0, TextDelta("m1", "<thi")),
        (0.1, TextDelta("m1", "nk>plan the answer")),
        (2.0, TextDelta("m1", "</think>\nThe answer is 42.")),
        (3.0, Finish("completed")),
    )
    assert all("plan" not in o.text and "<" not in o.text for o in ops)  # type: ignore[attr-defined]
    assert finals(ops) == ["The answer is 42."]


def test_unclosed_think_block_suppressed_to_the_end():
    m, ops = feed(model(), (0.0, TextDelta("m1", "Sure thing.\n<think>secret")), (5.0, Finish("completed")))
    assert finals(ops) == ["Sure thing.\n"]


# -- tool progress ---------------------------------------------------------------------------
def test_two_segments_around_a_tool_call_with_the_tool_line_between():
    m = model(tool_progress="new")
    m, ops = feed(
        m,
        (0.0, TextDelta("m1", "Let me check")),
        (0.5, ToolStarted("calculator")),
        (0.6, Break()),
        (0.7, ToolStarted("calculator")),
        (0.8, ToolStarted("search")),
        (2.0, TextDelta("m2", "It is 42")),
        (3.0, Finish("completed")),
    )
    sends = [o for o in ops if isinstance(o, Send)]
    assert [(s.segment, s.role) for s in sends] == [(0, "text"), (1, "progress"), (2, "text")]
    assert ops[1] == Edit(0, "Let me check", final=True)
    assert Edit(1, "🔧 calculator → search …", final=True, role="progress") in ops  # one line, updated
    assert finals([o for o in ops if o.role == "text"]) == ["Let me check", "It is 42"]  # type: ignore[attr-defined]


def test_tool_progress_off_or_no_edit_platform_eats_the_line():
    for m in (model(tool_progress="off"), model(tool_progress="all", can_edit=False)):
        _, ops = feed(m, (0.0, TextDelta("m1", "Checking")), (0.1, ToolStarted("t")), (0.2, Break()))
        assert all(o.role == "text" for o in ops)  # type: ignore[attr-defined]


# -- degradation ---------------------------------------------------------------------------
def test_degrade_leaves_preview_and_sends_exactly_the_missing_tail():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Hello wor")))
    m, ops = feed(m, (0.1, Degrade(shown=len("Hello wor"))))
    assert ops == [] and m.state is StreamState.DEGRADED
    m, ops = feed(m, (2.0, TextDelta("m1", "ld, and more")), (5.0, Tick()))
    assert ops == []  # no more edits
    m, ops = feed(m, (6.0, Finish("completed")))
    assert ops == [Send(1, "ld, and more", final=True)]
    assert m.state is StreamState.DELIVERED


def test_degrade_when_the_preview_never_landed_sends_everything_at_the_end():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Hello")))
    m, _ = feed(m, (0.1, Degrade(shown=None)), (1.0, TextDelta("m1", " there")))
    _, ops = feed(m, (2.0, Finish("completed")))
    assert ops == [Send(0, "Hello there", final=True)]


# -- stop and loss ---------------------------------------------------------------------------
def test_interrupt_appends_stopped_marker_and_then_nothing():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Partial")))
    m, ops = feed(m, (0.1, Finish("interrupted")))
    assert ops == [Edit(0, "Partial ⏹ stopped", final=True)]
    for inp in (TextDelta("m1", "late"), TextCompleted("m1", "x"), Break(), ToolStarted("t"), Tick()):
        assert transition(m, inp, 9.0) == (m, [])


def test_runner_lost_keeps_text_and_marks_where_it_ends():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Half an answer")))
    _, ops = feed(m, (0.1, Finish("failed", reason="runner_lost", error="the agent runner stopped responding")))
    assert ops == [
        Edit(0, "Half an answer\n\n⚠️ The assistant stopped unexpectedly, before finishing its answer.", final=True)
    ]


# -- coalescing ----------------------------------------------------------------------------
def test_coalesce_keeps_the_newest_frame_and_every_final():
    ops = [
        Send(0, "a ▉", False),
        Edit(0, "ab ▉", False),
        Edit(0, "abc", True),
        Send(1, "x ▉", False),
        Edit(1, "xy ▉", False),
    ]
    assert coalesce(ops) == [Send(0, "abc", True), Send(1, "xy ▉", False)]
