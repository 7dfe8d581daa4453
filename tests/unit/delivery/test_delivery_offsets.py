"""Commit points: a partition is committed at most up to the first event of its oldest unfinished stream."""

from __future__ import annotations

from agentstream.kafka.offsets import CommitPoints


# -- commit points ------------------------------------------------------------------------------
def test_commit_stops_at_the_first_event_of_the_oldest_unfinished_stream():
    cp = CommitPoints()
    for off in range(10):
        cp.read(0, off)
    cp.hold(0, 3)
    cp.hold(0, 6)
    assert cp.due() == {0: 3}
    cp.committed({0: 3})
    assert cp.due() == {}
    cp.release(0, 3)
    assert cp.due() == {0: 6}
    cp.release(0, 6)
    assert cp.due() == {0: 10}


def test_partitions_are_independent_and_forgotten_on_revoke():
    cp = CommitPoints()
    cp.read(0, 4)
    cp.read(1, 9)
    cp.hold(1, 2)
    assert cp.due() == {0: 5, 1: 2}
    cp.forget({1})
    assert cp.due() == {0: 5}
