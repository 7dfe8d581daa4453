"""How a root run ends: the outcome state machine."""

from __future__ import annotations

from agentstream_runner.outcome import RunOutcome, RunState


def test_rebalance_stops_fail_other_stops_interrupt():
    outcome = RunOutcome(started_at=0.0)
    outcome.stop("rebalanced")
    assert (outcome.state, outcome.reason, outcome.error) == (RunState.FAILED, "rebalanced", "run stopped: rebalanced")
    outcome = RunOutcome(started_at=0.0)
    outcome.stop("user")
    assert (outcome.state, outcome.reason) == (RunState.INTERRUPTED, "user")
