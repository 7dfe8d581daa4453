"""How a root run ends: the outcome state machine."""

from __future__ import annotations

import pytest

from agentstream.contracts import FinishReason, RunStatus, Usage
from agentstream_runner.outcome import InvalidTransition, RunOutcome, RunState


def test_rebalance_stops_fail_other_stops_interrupt():
    outcome = RunOutcome(started_at=0.0)
    outcome.stop("rebalanced")
    assert (outcome.state, outcome.reason, outcome.error) == (RunState.FAILED, "rebalanced", "run stopped: rebalanced")
    outcome = RunOutcome(started_at=0.0)
    outcome.stop("user")
    assert (outcome.state, outcome.reason) == (RunState.INTERRUPTED, "user")


def test_a_run_that_ends_without_a_transition_reports_its_defaults():
    outcome = RunOutcome(started_at=10.0)
    assert outcome.state is RunState.RUNNING
    outcome.complete()
    assert outcome.finished_fields(now=10.25) == {
        "status": RunStatus.COMPLETED,
        "error": None,
        "reason": None,
        "text": "",
        "usage": Usage(),
        "duration_ms": 250.0,
        "data": {},
    }


def test_the_answer_and_the_usage_are_what_the_run_recorded():
    outcome = RunOutcome(started_at=1.0)
    outcome.add_usage(Usage(prompt_tokens=3, completion_tokens=4, llm_calls=1))
    outcome.add_usage(Usage(prompt_tokens=10, completion_tokens=1, llm_calls=1))
    data = {"next": "b"}
    outcome.set_answer("first", {"k": 1})
    outcome.set_answer("hello", data)
    data["next"] = "changed after the fact"
    outcome.complete()
    fields = outcome.finished_fields(now=1.0)
    assert fields["usage"] == Usage(prompt_tokens=13, completion_tokens=5, llm_calls=2)
    assert (fields["text"], fields["data"]) == ("hello", {"next": "b"})
    assert fields["duration_ms"] == 0.0


def test_an_answer_without_data_has_empty_data():
    outcome = RunOutcome(started_at=0.0)
    outcome.set_answer("x", {"a": 1})
    outcome.set_answer("y")
    assert outcome.data == {}


def test_a_failure_carries_its_error_and_reason():
    outcome = RunOutcome(started_at=0.0)
    outcome.fail("model unreachable")
    fields = outcome.finished_fields(now=0.0)
    assert (fields["status"], fields["error"], fields["reason"]) == (
        RunStatus.FAILED,
        "model unreachable",
        FinishReason.ERROR,
    )


def test_an_interrupt_keeps_its_reason_and_has_no_error():
    outcome = RunOutcome(started_at=0.0)
    outcome.interrupt(FinishReason.DOUBLE_TEXTING)
    fields = outcome.finished_fields(now=0.0)
    assert (fields["status"], fields["error"], fields["reason"]) == (
        RunStatus.INTERRUPTED,
        None,
        FinishReason.DOUBLE_TEXTING,
    )


@pytest.mark.parametrize(
    "end", [lambda o: o.complete(), lambda o: o.fail("again"), lambda o: o.interrupt(FinishReason.USER)]
)
def test_a_run_ends_exactly_once(end):
    outcome = RunOutcome(started_at=0.0)
    outcome.fail("first", reason=FinishReason.REBALANCED)
    with pytest.raises(InvalidTransition, match="run already ended as failed, cannot end as"):
        end(outcome)
    assert (outcome.state, outcome.error, outcome.reason) == (RunState.FAILED, "first", FinishReason.REBALANCED)


def test_a_run_still_running_at_the_end_is_recorded_as_aborted():
    outcome = RunOutcome(started_at=0.0)
    outcome.set_answer("partial")
    fields = outcome.finished_fields(now=0.002)
    assert (fields["status"], fields["error"], fields["reason"]) == (
        RunStatus.FAILED,
        "run ended unexpectedly",
        FinishReason.ABORTED,
    )
    assert (fields["text"], fields["duration_ms"]) == ("partial", 2.0)
    assert outcome.state is RunState.FAILED


def test_the_duration_is_rounded_to_microseconds():
    outcome = RunOutcome(started_at=0.0)
    outcome.complete()
    assert outcome.finished_fields(now=0.0012344)["duration_ms"] == 1.234


def test_run_states_end_as_the_run_statuses_of_the_contract():
    assert [RunState(s.value) for s in RunStatus] == [RunState.COMPLETED, RunState.FAILED, RunState.INTERRUPTED]
    assert RunState.RUNNING.value == "running"


def test_a_running_outcome_has_no_error_reason_or_answer_yet():
    outcome = RunOutcome(started_at=0.0)
    assert (outcome.error, outcome.reason, outcome.text, outcome.data) == (None, None, "", {})
