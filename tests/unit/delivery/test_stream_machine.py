"""The stream state machine, transition by transition, with a fake clock: cadence, segments, buffer
threshold, length splits, think blocks, tool progress and degradation."""

from __future__ import annotations

import pytest

from agentstream.config import TextFormat
from agentstream.contracts import FinishReason, MessageDelta, RunFinished, SegmentBreak, ToolCall, ToolHeartbeat
from agentstream_delivery.formatting import render_frame
from agentstream_delivery.platform_ops import Edit, Send, coalesce
from agentstream_delivery.splitting import open_fence, unsplit, utf16_len
from agentstream_delivery.stream_inputs import (
    Break,
    Degrade,
    Finish,
    TextCompleted,
    TextDelta,
    Tick,
    ToolStarted,
    stream_input,
)
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamState
from tests.unit.delivery.machine_harness import CURSOR, INTERVAL, feed, model, previewing


# -- IDLE ----------------------------------------------------------------------------
def test_no_platform_message_before_four_visible_chars():
    m, ops = feed(model(), (0.0, TextDelta("m1", "Hi ")), (0.1, TextDelta("m1", "\n t")))
    assert ops == [] and m.state is StreamState.IDLE  # "Hi \n t" has 3 visible chars
    m, ops = feed(m, (0.2, TextDelta("m1", "o")))
    assert ops == [Send(0, "Hi \n to" + CURSOR, final=False)]
    assert m.state is StreamState.PREVIEWING


def test_first_send_is_immediate_regardless_of_interval():
    _, ops = feed(model(), (0.0, TextDelta("m1", "abcd")))
    assert ops == [Send(0, "abcd" + CURSOR, final=False)]


def test_break_in_idle_sends_short_pending_text_as_final():
    m, ops = feed(model(), (0.0, TextDelta("m1", "Ok")), (0.1, Break()))
    assert ops == [Send(0, "Ok", final=True)]
    assert m.state is StreamState.SEALED and m.msg == 1


def test_break_without_text_changes_nothing():
    m0 = model()
    m, ops = feed(m0, (0.0, Break()))
    assert ops == [] and m == m0


def test_tick_in_idle_is_ignored():
    m0 = model()
    assert transition(m0, Tick(), 5.0) == (m0, [])


# -- PREVIEWING: cadence ----------------------------------------------------------------
def test_at_most_one_edit_per_interval_and_held_frame_flushed_by_timer():
    m = previewing("Hello", at=0.0)
    m, ops = feed(m, (0.3, TextDelta("m1", " wor")), (0.6, TextDelta("m1", "ld")))
    assert ops == []  # interval not passed: held back
    assert m.flush_at == pytest.approx(INTERVAL)  # the timer is armed for when it may go out
    m, ops = feed(m, (0.99, Tick()))
    assert ops == []  # an early tick does not send
    m, ops = feed(m, (1.0, Tick()))
    assert ops == [Edit(0, "Hello world" + CURSOR, final=False)]
    assert m.flush_at is None


def test_edit_goes_out_at_once_when_interval_has_passed():
    m = previewing("Hello", at=0.0)
    m, ops = feed(m, (1.5, TextDelta("m1", " there")))
    assert ops == [Edit(0, "Hello there" + CURSOR, final=False)]
    m, ops = feed(m, (2.0, TextDelta("m1", "!")))
    assert ops == [] and m.flush_at == pytest.approx(2.5)  # interval counts from the last edit


def test_identical_frames_are_never_sent():
    m = previewing("Hello world", at=0.0)
    # message.completed with the text the deltas already built: nothing new to show
    m, ops = feed(m, (2.0, TextCompleted("m1", "Hello world")), (3.0, Tick()))
    assert ops == []
    m, ops = feed(m, (4.0, TextDelta("m1", "")))
    assert ops == []


def test_completed_text_replaces_the_deltas_of_that_message():
    m = previewing("Hell", at=0.0)
    m, _ = feed(m, (0.0, TextDelta("m1", "o wrld")))
    m, ops = feed(m, (2.0, TextCompleted("m1", "Hello world")))
    assert ops == [Edit(0, "Hello world" + CURSOR, final=False)]


def test_two_messages_in_one_segment_are_separated_by_a_blank_line():
    m = previewing("First", at=0.0)
    m, ops = feed(m, (2.0, TextDelta("m2", "Second")))
    assert ops == [Edit(0, "First\n\nSecond" + CURSOR, final=False)]


# -- segment breaks ---------------------------------------------------------------------
def test_segment_break_seals_message_and_later_text_opens_a_new_one():
    m = previewing("Let me check", at=0.0)
    m, ops = feed(m, (0.1, Break()))
    assert ops == [Edit(0, "Let me check", final=True)]  # sealed even inside the interval, no cursor
    assert m.state is StreamState.SEALED
    m, ops = feed(m, (0.2, TextDelta("m2", "The")))
    assert ops == [] and m.state is StreamState.SEALED
    m, ops = feed(m, (0.3, TextDelta("m2", " answer")))
    assert ops == [Send(1, "The answer" + CURSOR, final=False)]
    assert m.state is StreamState.PREVIEWING


def test_text_of_a_sealed_message_is_not_shown_again():
    m = previewing("Let me check", at=0.0)
    m, _ = feed(m, (0.1, Break()))
    m, ops = feed(m, (0.2, TextCompleted("m1", "Let me check")), (0.3, Finish("completed")))
    assert ops == [] and m.state is StreamState.DELIVERED


def test_cursor_only_on_intermediate_frames():
    m = model()
    steps = [
        (0.0, TextDelta("m1", "Hello")),
        (1.0, TextDelta("m1", " big")),
        (1.5, TextDelta("m1", " world")),
        (2.0, Tick()),
        (2.1, Break()),
        (2.2, TextDelta("m2", "Second part")),
        (4.0, TextDelta("m2", "!")),
        (4.1, Finish("completed")),
    ]
    _, ops = feed(m, *steps)
    assert len(ops) == 7  # send, edit, timer edit, seal; send, edit, final
    for op in ops:
        assert isinstance(op, Send | Edit)
        assert op.text.endswith(CURSOR) is (not op.final)
    assert [op.text for op in ops if op.final] == ["Hello big world", "Second part!"]


# -- platforms that cannot edit -----------------------------------------------------------
def test_platform_without_edit_gets_final_texts_only():
    m = model(can_edit=False)
    m, ops = feed(
        m,
        (0.0, TextDelta("m1", "Let me check")),
        (5.0, Break()),
        (6.0, TextDelta("m2", "The answer is 42")),
        (9.0, Finish("completed")),
    )
    assert ops == [Send(0, "Let me check", final=True), Send(1, "The answer is 42", final=True)]


# -- event → input ----------------------------------------------------------------------------
def _ids() -> dict[str, object]:
    return {"run_id": "r", "root_run_id": "r", "conversation_key": "memory:c", "seq": 1}


def test_stream_input_mapping():
    assert stream_input(MessageDelta(**_ids(), message_id="m", text="hi")) == TextDelta("m", "hi")
    assert stream_input(MessageDelta(**_ids(), message_id="m", text="hmm", kind="thinking")) is None
    assert stream_input(SegmentBreak(**_ids())) == Break()
    assert stream_input(ToolCall(**_ids(), call_id="c", tool="t", arguments="{}")) == ToolStarted("t")
    assert stream_input(ToolCall(**_ids(), call_id="c", tool="t", arguments="{}", attempt=2)) is None
    assert stream_input(ToolHeartbeat(**_ids(), call_id="c", tool="t", elapsed_ms=5000)) is None  # not shown
    fin = RunFinished(**_ids(), status="failed", reason="runner_lost")
    assert stream_input(fin) == Finish("failed", "runner_lost", None, "")
    assert stream_input(fin).reason is FinishReason.RUNNER_LOST  # type: ignore[union-attr]


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


# -- edges -----------------------------------------------------------------------------------
def test_a_stream_that_starts_with_a_tool_call_shows_the_tool_line_first_then_the_answer():
    m, ops = feed(model(tool_progress="all"), (0.0, ToolStarted("search")))
    assert ops == [] and m.state is StreamState.IDLE  # remembered until its round ends
    m, ops = feed(m, (0.1, Break()), (0.2, ToolStarted("fetch")))
    assert ops == [
        Send(0, "🔧 search …", final=True, role="progress"),
        Edit(0, "🔧 search → fetch …", final=True, role="progress"),
    ]
    assert m.state is StreamState.SEALED
    m, ops = feed(m, (1.0, TextDelta("m1", "Result is 42")), (2.0, Finish("completed")))
    assert ops == [Send(1, "Result is 42" + CURSOR, final=False), Edit(1, "Result is 42", final=True)]
    assert m.state is StreamState.DELIVERED


def test_progress_lines_are_final_messages_that_an_ending_marks():
    m, ops = feed(model(tool_progress="all"), (0.0, ToolStarted("search")), (0.1, Break()))
    assert [(o.role, o.final) for o in ops] == [("progress", True)]  # type: ignore[attr-defined]
    _, ops = feed(m, (0.5, Finish("interrupted")))
    assert ops == [Edit(0, "🔧 search … ⏹ stopped", final=True, role="progress")]


@pytest.mark.parametrize("pending", ["O", "Ok", "Ok!"])
def test_an_interrupt_with_a_few_chars_pending_and_no_preview_sends_them_stopped(pending: str):
    m, ops = feed(model(), (0.0, TextDelta("m1", pending)))
    assert ops == [] and m.frame is None  # under four visible chars: no preview yet
    m, ops = feed(m, (0.5, Finish("interrupted")))
    assert ops == [Send(0, pending + " ⏹ stopped", final=True)]
    assert m.state is StreamState.INTERRUPTED


def test_a_text_ending_in_what_could_open_a_think_block_is_held_while_streaming_and_shown_at_the_end():
    m, ops = feed(model(), (0.0, TextDelta("m1", "Compare a\n<th")))
    assert ops == [Send(0, "Compare a\n" + CURSOR, final=False)]
    _, ops = feed(m, (0.1, Break()))
    assert ops == [Edit(0, "Compare a\n<th", final=True)]
    m, ops = feed(model(), (0.0, TextDelta("m1", "\n<th")), (0.1, Break()))
    assert ops == [Send(0, "\n<th", final=True)]  # (nothing visible while streaming; at the break it is text)
    _, ops = feed(model(), (0.0, TextDelta("m1", "Answer\n<th")), (0.1, Finish("interrupted")))
    assert ops[-1] == Edit(0, "Answer\n<th ⏹ stopped", final=True)


def test_a_seal_resets_the_message_so_the_next_segment_starts_clean():
    m = model(max_length=1000)
    code = "```py\n" + "".join(f"x_{i} = {i}\n" for i in range(150))
    m, _ = feed(m, (0.0, TextDelta("m1", code)))
    assert m.carry == "```py\n" and m.base > 0  # split inside the fence
    m, _ = feed(m, (0.1, TextDelta("m1", "```")), (0.2, Break()))
    assert (m.base, m.carry, m.frame, m.shown, m.sent_at, m.flush_at) == (0, "", None, 0, None, None)
    msg = m.msg
    m, ops = feed(m, (5.0, TextDelta("m2", "Next part")))
    assert ops == [Send(msg, "Next part" + CURSOR, final=False)]


def test_a_split_opens_the_next_message_at_once_and_remembers_the_sealed_head():
    m = model(max_length=1000)
    m, ops = feed(m, (0.0, TextDelta("m1", "word " * 100)), (0.1, TextDelta("m1", "word " * 120)))
    heads = [o for o in ops if o.final]  # type: ignore[attr-defined]
    assert len(heads) == 1 and isinstance(heads[0], Edit) and heads[0].segment == 0
    assert m.sealed == (0, heads[0].text) and m.msg == 1
    assert ops[-1] == Send(1, m.frame, final=False) and m.frame.endswith(CURSOR)  # type: ignore[union-attr]
    assert (m.sent_at, m.flush_at) == (0.1, None)


def test_an_edit_remembers_its_frame_and_an_unchanged_frame_clears_the_timer():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Hello")), (0.2, TextDelta("m1", " there")))
    assert m.flush_at == INTERVAL and m.frame == "Hello" + CURSOR
    m, ops = feed(m, (INTERVAL, Tick()))
    assert ops == [Edit(0, "Hello there" + CURSOR, final=False)]
    assert (m.frame, m.shown, m.sent_at, m.flush_at) == ("Hello there" + CURSOR, len("Hello there"), INTERVAL, None)
    m, ops = feed(m, (1.1, TextDelta("m1", "!")))
    assert ops == [] and m.flush_at == INTERVAL * 2
    m, ops = feed(m, (1.2, TextCompleted("m1", "Hello there")))  # back to what is shown: nothing is due
    assert ops == [] and m.flush_at is None


def test_a_finished_stream_has_no_open_frame_nor_timer():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Hello")), (0.2, TextDelta("m1", " there")))
    assert m.flush_at is not None
    for status in ("completed", "interrupted", "failed"):
        end, _ = feed(m, (0.3, Finish(status)))
        assert (end.frame, end.flush_at) == (None, None)


def test_degrade_stops_the_timer_and_keeps_a_reopened_fence_for_the_missing_tail():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Code:\n```py\nx = 1\n")), (0.2, TextDelta("m1", "y = 2\n")))
    assert m.flush_at is not None
    m, ops = feed(m, (0.3, Degrade(shown=len("Code:\n```py\nx = 1\n"))))
    assert ops == [] and m.flush_at is None and (m.msg, m.carry, m.frame, m.shown) == (1, "```py\n", None, 0)
    _, ops = feed(m, (1.0, TextDelta("m1", "```")), (2.0, Finish("completed")))
    assert ops == [Send(1, "```py\ny = 2\n```", final=True)]


def test_degrade_of_a_preview_that_never_landed_stops_the_timer():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Hello")), (0.2, TextDelta("m1", " there")))
    m, _ = feed(m, (0.3, Degrade(shown=None)))
    assert (m.flush_at, m.frame, m.shown, m.msg) == (None, None, 0, 0)


def test_a_failure_notice_takes_a_message_index_of_its_own():
    m, ops = feed(model(), (0.0, Finish("failed", error="boom")))
    assert [o.segment for o in ops] == [0] and m.msg == 1  # type: ignore[attr-defined]


def test_a_degraded_stream_stays_degraded_across_a_segment_break():
    m, _ = feed(model(), (0.0, TextDelta("m1", "Hello wor")), (0.1, Degrade(shown=len("Hello wor"))))
    m, ops = feed(m, (0.2, TextDelta("m1", "ld")), (0.3, Break()))
    assert ops == [Send(1, "ld", final=True)] and m.state is StreamState.DEGRADED  # the missing tail, sealed
    m, ops = feed(m, (1.0, TextDelta("m2", "Second segment")), (3.0, Tick()))
    assert ops == []  # no previews once degraded


def test_a_marker_that_fills_the_message_exactly_still_fits():
    text = "Partial answ"
    m, _ = feed(model(max_length=len(text + " ⏹ stopped")), (0.0, TextDelta("m1", text)))
    _, ops = feed(m, (0.1, Finish("interrupted")))
    assert ops == [Edit(0, text + " ⏹ stopped", final=True)]


@pytest.mark.parametrize("fmt", [TextFormat.TELEGRAM_HTML, TextFormat.PLAIN])
def test_a_frame_that_renders_to_what_the_message_shows_is_not_sent(fmt: TextFormat):
    # Markdown ignores blank lines at the end: `<<<<\n\n` and `<<<<\n\n\n\n` render alike, and
    # Telegram refuses an edit to what a message shows (400 "message is not modified").
    shown, longer = "<<<<\n\n" + CURSOR, "<<<<\n\n\n\n" + CURSOR
    assert render_frame(shown, fmt, final=False) == render_frame(longer, fmt, final=False)
    m, ops = feed(model(formatting=fmt), (0.0, TextDelta("m1", "<<<<\n\n")))
    assert ops == [Send(0, "<<<<\n\n" + CURSOR, final=False)]
    m, ops = feed(m, (2.0, TextDelta("m1", "\n\n")), (3.0, Tick()))
    assert ops == [] and m.flush_at is None
    m, ops = feed(m, (4.0, TextDelta("m1", "x")))  # something the reader sees: edited as usual
    assert ops == [Edit(0, "<<<<\n\n\n\nx" + CURSOR, final=False)]


def test_a_frame_that_only_differs_in_its_markdown_is_held_without_a_timer():
    m, ops = feed(model(formatting=TextFormat.TELEGRAM_HTML), (0.0, TextDelta("m1", "**bold** text\n\n")))
    m, ops = feed(m, (0.5, TextDelta("m1", "\n\n\n")))  # within the interval: nothing is due at all
    assert ops == [] and m.flush_at is None
