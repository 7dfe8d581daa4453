"""How a run ends on the platform: the final text of a completed, interrupted or failed run, per reason
and capability; terminal states ignore what comes after; and how a resume re-marks the partial first attempt."""

from __future__ import annotations

import pytest

from agentstream.contracts import FinishReason, RunFinished, RunStatus
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.render import RESUMED_MARKER, RESUMED_NOTICE
from agentstream_delivery.stream_inputs import Break, Finish, TextDelta, Tick, ToolStarted, stream_input
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel, StreamState
from tests.unit.delivery.machine_harness import feed as feed_at
from tests.unit.delivery.machine_harness import model, previewing

PARTIAL = "Half an answer"
# The documented texts (docs/delivery.md, "How a run ends"), spelled out: a change must change both.
LOST = "⚠️ The assistant stopped unexpectedly, before finishing its answer."
MOVED = "⚠️ The assistant was moved to another worker before finishing its answer."
RESTARTED = "⏸ The assistant was restarted before finishing its answer."
ABORTED = "⚠️ The answer ended unexpectedly."
STOPPED = " ⏹ stopped"

# (status, reason, error) → the marker after the partial text, the notice when nothing was shown.
CASES = [
    (
        RunStatus.FAILED,
        FinishReason.RUNNER_LOST,
        "the agent runner stopped responding (no event for 30 s)",
        "\n\n" + LOST,
        LOST,
    ),
    (RunStatus.FAILED, FinishReason.REBALANCED, "run stopped: rebalanced", "\n\n" + MOVED, MOVED),
    (RunStatus.INTERRUPTED, FinishReason.SHUTDOWN, None, "\n\n" + RESTARTED, RESTARTED),
    (RunStatus.FAILED, FinishReason.ABORTED, "run ended unexpectedly", "\n\n" + ABORTED, ABORTED),
    (
        RunStatus.FAILED,
        FinishReason.ERROR,
        "tool calls failed: boom",
        "\n\n⚠️ The run failed: tool calls failed: boom",
        "⚠️ The run failed: tool calls failed: boom",
    ),
    (RunStatus.FAILED, None, None, "\n\n⚠️ The run failed: unknown error", "⚠️ The run failed: unknown error"),
    (RunStatus.INTERRUPTED, FinishReason.USER, None, STOPPED, None),
    (RunStatus.INTERRUPTED, FinishReason.RESET, None, STOPPED, None),
    (RunStatus.INTERRUPTED, FinishReason.DOUBLE_TEXTING, None, STOPPED, None),
    (RunStatus.INTERRUPTED, None, None, STOPPED, None),
]
IDS = [f"{s}-{r}" for s, r, *_ in CASES]


def feed(m: StreamModel, *inputs: object) -> tuple[StreamModel, list[object]]:
    ops: list[object] = []
    for i, inp in enumerate(inputs):
        m, out = transition(m, inp, float(i))  # type: ignore[arg-type]
        ops.extend(out)
    return m, ops


def fin(status: RunStatus, reason: FinishReason | None, error: str | None) -> Finish:
    # Through the contract: the delivery input is what the `run.finished` record says.
    event = RunFinished(
        run_id="r",
        root_run_id="r",
        conversation_key="memory:c",
        seq=9,
        status=status,
        reason=reason,
        error=error,
        text=PARTIAL,
    )
    inp = stream_input(event)
    assert isinstance(inp, Finish)
    return inp


@pytest.mark.parametrize(("status", "reason", "error", "marker", "notice"), CASES, ids=IDS)
def test_open_preview_ends_with_the_reasons_marker(status, reason, error, marker, notice):
    m, _ = feed(model(), TextDelta("m1", PARTIAL))
    m, ops = feed(m, fin(status, reason, error))
    assert ops == [Edit(0, PARTIAL + marker, final=True)]
    assert m.state is (StreamState.FAILED if status is RunStatus.FAILED else StreamState.INTERRUPTED)
    assert m.on_resume == Edit(0, PARTIAL + RESUMED_MARKER, final=True)


@pytest.mark.parametrize(("status", "reason", "error", "marker", "notice"), CASES, ids=IDS)
def test_sealed_text_gets_the_marker_by_a_final_edit(status, reason, error, marker, notice):
    m, _ = feed(model(), TextDelta("m1", PARTIAL), Break())
    _, ops = feed(m, fin(status, reason, error))
    assert ops == [Edit(0, PARTIAL + marker, final=True)]


@pytest.mark.parametrize(("status", "reason", "error", "marker", "notice"), CASES, ids=IDS)
def test_nothing_shown_gets_the_notice_that_a_resume_re_marks(status, reason, error, marker, notice):
    m, ops = feed(model(), fin(status, reason, error))
    if notice is None:  # a stop someone asked for: the command's own reply says so
        assert ops == [] and m.on_resume is None
        return
    assert ops == [Send(0, notice, final=True, role="notice")]
    assert m.on_resume == Edit(0, RESUMED_NOTICE, final=True, role="notice")


@pytest.mark.parametrize(("status", "reason", "error", "marker", "notice"), CASES, ids=IDS)
def test_platform_without_edit_sends_the_pending_text_with_its_marker(status, reason, error, marker, notice):
    m, ops = feed(model(can_edit=False), TextDelta("m1", PARTIAL), fin(status, reason, error))
    assert ops == [Send(0, PARTIAL + marker, final=True)]
    assert m.on_resume is None  # nothing to edit: the ending's words stay, the resumed answer follows


@pytest.mark.parametrize(("status", "reason", "error", "marker", "notice"), CASES, ids=IDS)
def test_platform_without_edit_follows_sent_text_with_a_short_message(status, reason, error, marker, notice):
    m, _ = feed(model(can_edit=False), TextDelta("m1", PARTIAL), Break())
    _, ops = feed(m, fin(status, reason, error))
    assert ops == [Send(1, marker.strip(), final=True, role="notice")]


def test_a_tool_line_below_the_text_is_the_message_that_ends():
    m, _ = feed(model(tool_progress="all"), TextDelta("m1", PARTIAL), Break(), ToolStarted("search"))
    assert m.progress == (1, "🔧 search …")
    m, ops = feed(m, fin(RunStatus.FAILED, FinishReason.RUNNER_LOST, None))
    assert ops == [Edit(1, "🔧 search …\n\n" + LOST, final=True, role="progress")]
    assert m.on_resume == Edit(1, "🔧 search …" + RESUMED_MARKER, final=True, role="progress")


def test_a_marker_that_does_not_fit_goes_into_a_message_of_its_own():
    text = "x" * 500  # a tiny platform limit: the text fits, the text and the marker do not
    m, _ = feed(model(max_length=520), TextDelta("m1", text))
    m, ops = feed(m, fin(RunStatus.FAILED, FinishReason.RUNNER_LOST, None))
    assert ops == [Edit(0, text, final=True), Send(1, LOST, final=True, role="notice")]
    assert m.on_resume is None  # the resumed marker does not fit either: the notice marks the attempt


def test_completed_runs_carry_no_marker_and_nothing_to_re_mark():
    m, _ = feed(model(), TextDelta("m1", PARTIAL))
    m, ops = feed(m, fin(RunStatus.COMPLETED, None, None))
    assert ops == [Edit(0, PARTIAL, final=True)] and m.on_resume is None


# -- run.finished, at set times -------------------------------------------------------------------------
def test_completed_final_edit_is_the_exact_text_without_cursor():
    m = previewing("Hello", at=0.0)
    m, _ = feed_at(m, (0.1, TextDelta("m1", " world  ")))
    m, ops = feed_at(m, (0.2, Finish("completed", text="Hello world")))
    assert ops == [Edit(0, "Hello world  ", final=True)]
    assert m.state is StreamState.DELIVERED and m.flush_at is None


def test_completed_with_short_pending_text_sends_it():
    m, ops = feed_at(model(), (0.0, TextDelta("m1", "42")), (0.1, Finish("completed", text="42")))
    assert ops == [Send(0, "42", final=True)]


def test_completed_with_nothing_streamed_sends_the_answer_text():
    _, ops = feed_at(model(), (0.0, Finish("completed", text="The answer")))
    assert ops == [Send(0, "The answer", final=True)]


def test_completed_after_seal_sends_nothing_more():
    m, _ = feed_at(previewing("Done."), (0.1, Break()))
    m, ops = feed_at(m, (0.2, Finish("completed", text="Done.")))
    assert ops == [] and m.state is StreamState.DELIVERED


def test_interrupted_appends_stop_marker_to_open_message():
    m, ops = feed_at(previewing("Partial answ"), (0.1, Finish("interrupted")))
    assert ops == [Edit(0, "Partial answ ⏹ stopped", final=True)]
    assert m.state is StreamState.INTERRUPTED


def test_interrupted_after_seal_marks_the_last_sealed_message():
    m, _ = feed_at(previewing("Calling a tool"), (0.1, Break()))
    _, ops = feed_at(m, (0.2, Finish("interrupted")))
    assert ops == [Edit(0, "Calling a tool ⏹ stopped", final=True)]


def test_interrupted_with_nothing_shown_sends_nothing():
    m, ops = feed_at(model(), (0.0, Finish("interrupted")))
    assert ops == [] and m.state is StreamState.INTERRUPTED


def test_failed_with_nothing_shown_sends_failure_notice():
    m, ops = feed_at(model(), (0.0, Finish("failed", error="connector not specified")))
    assert ops == [Send(0, "⚠️ The run failed: connector not specified", final=True, role="notice")]
    assert m.state is StreamState.FAILED


def test_failed_with_short_pending_text_keeps_text_and_explains():
    _, ops = feed_at(model(), (0.0, TextDelta("m1", "So")), (0.1, Finish("failed", error="boom")))
    assert ops == [Send(0, "So\n\n⚠️ The run failed: boom", final=True)]


def test_failed_after_text_was_shown_finalizes_it_with_the_reason():
    m, ops = feed_at(previewing("Half an ans"), (0.1, Finish("failed", error="boom")))
    assert ops == [Edit(0, "Half an ans\n\n⚠️ The run failed: boom", final=True)]
    assert m.state is StreamState.FAILED


@pytest.mark.parametrize("status", ["completed", "interrupted", "failed"])
def test_terminal_states_ignore_everything(status: str):
    m, _ = feed_at(previewing("Hello"), (0.1, Finish(status)))  # type: ignore[arg-type]
    for inp in (TextDelta("m1", "more"), Break(), Tick(), Finish("completed", text="x")):
        assert transition(m, inp, 9.0) == (m, [])
