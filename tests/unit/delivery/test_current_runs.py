"""Which run of a conversation is current: superseded and finished runs stay over, a resumed run is current again."""

from __future__ import annotations

from agentstream_delivery.current_runs import CurrentRuns


def test_newer_run_supersedes_the_older_and_finished_runs_stay_over():
    rc = CurrentRuns(limit=2)
    assert rc.start("k", "a") is None
    assert rc.start("k", "b") == "a"
    assert rc.is_over("a") and not rc.is_over("b")
    rc.end("b")
    assert rc.start("k", "c") is None  # b already finished: nothing to supersede
    rc.end("c")
    assert not rc.is_over("a")  # bounded memory: the oldest are forgotten


def test_a_resumed_run_is_current_again_but_late_events_are_not():
    rc = CurrentRuns()
    rc.start("k", "a", 1)
    rc.end("a", 5)
    assert rc.is_over("a") and not rc.resumes("a", 3)
    assert rc.resumes("a", 6)
    rc.start("k", "a", 6)
    assert not rc.is_over("a")
    rc.start("k", "b", 1)  # superseded: never current again
    assert rc.is_over("a") and not rc.resumes("a", 10**6)


def test_forgetting_moved_conversations_lets_their_runs_be_read_again():
    """A revoked partition coming back is read again from its commit: a run known here as over
    (finished or superseded) must open its stream again, and its conversation has no current run."""
    rc = CurrentRuns()
    rc.start("moved", "a", 1)
    rc.end("a", 5, "moved")
    rc.start("moved", "b", 1)
    rc.start("moved", "c", 1)  # b superseded
    rc.start("kept", "d", 1)
    rc.end("d", 4, "kept")
    rc.forget({"moved"})
    assert not rc.is_over("a") and not rc.is_over("b") and rc.is_over("d")
    assert rc.start("moved", "b", 1) is None  # c is no longer current here: nothing to supersede
    assert rc.start("kept", "e", 1) is None and rc.is_over("d")
