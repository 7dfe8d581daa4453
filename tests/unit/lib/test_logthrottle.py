"""Repeated log lines: the first through, repeats counted, one line per interval with the count."""

from __future__ import annotations

import logging

import pytest

from agentstream.logthrottle import MAX_KEYS, Throttle, ThrottleFilter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record(name: str, msg: object, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args or None, None)


def test_first_through_repeats_counted_then_one_line_with_the_count() -> None:
    clock = Clock()
    throttle = Throttle(10.0, clock)
    assert throttle.admit("k") == 0
    assert [throttle.admit("k") for _ in range(5)] == [None] * 5
    assert throttle.admit("other") == 0  # kinds are counted apart
    clock.now += 10.0
    assert throttle.admit("k") == 5
    assert throttle.admit("k") is None
    clock.now += 10.0
    assert throttle.admit("k") == 1


def test_memory_is_bounded_by_the_number_of_kinds() -> None:
    clock = Clock()
    throttle = Throttle(10.0, clock)
    for i in range(MAX_KEYS * 3):
        throttle.admit(i)
    assert len(throttle._seen) <= MAX_KEYS


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        Throttle(0)


def test_filter_throttles_aiokafka_by_format_string_and_says_how_many() -> None:
    clock = Clock()
    flt = ThrottleFilter(interval_s=10.0, clock=clock)
    fmt = "OffsetCommit failed for group %s on partition %s: %s"
    first = record("aiokafka.consumer.group_coordinator", fmt, "g", "p0", "UnknownTopicOrPartitionError")
    assert flt.filter(first)
    # Other partitions, same kind of line: dropped within the interval.
    assert not any(
        flt.filter(record("aiokafka.consumer.group_coordinator", fmt, "g", f"p{i}", "E")) for i in range(1, 78)
    )
    clock.now += 10.0
    later = record("aiokafka.consumer.group_coordinator", fmt, "g", "p9", "E")
    assert flt.filter(later)
    assert (
        later.getMessage() == "OffsetCommit failed for group g on partition p9: E (77 more like this in the last 10 s)"
    )


def test_filter_throttles_our_listed_events_and_passes_everything_else() -> None:
    clock = Clock()
    flt = ThrottleFilter(interval_s=10.0, clock=clock)
    ours = [record("agentstream.persistence", {"event": "offset commit failed", "points": {"0": i}}) for i in range(4)]
    assert [flt.filter(r) for r in ours] == [True, False, False, False]
    other = [record("agentstream.persistence", {"event": "run flushed"}) for _ in range(3)]
    assert all(flt.filter(r) for r in other)
    assert all(flt.filter(record("uvicorn.error", "same line")) for _ in range(3))
    clock.now += 11.0
    again = record("agentstream.persistence", {"event": "offset commit failed", "points": {"0": 9}})
    assert flt.filter(again)
    assert isinstance(again.msg, dict) and again.msg["repeated"] == 3 and again.msg["points"] == {"0": 9}
