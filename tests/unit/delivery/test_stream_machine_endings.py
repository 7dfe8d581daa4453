"""How a run that did not complete ends on the platform: the final text per reason and
capability, and how a resume re-marks the partial first attempt."""

from __future__ import annotations

import pytest

from agentstream.contracts import FinishReason, RunFinished, RunStatus
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.render import RESUMED_MARKER, RESUMED_NOTICE
from agentstream_delivery.stream_inputs import Break, Finish, TextDelta, ToolStarted, stream_input
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel, StreamState
from tests.unit.delivery.machine_harness import model

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
