"""BoundedMap: idle entries expire, the least recently used go beyond the cap, entries in use stay."""

from __future__ import annotations

import pytest

from agentstream.bounded import BoundedMap, RecentIds


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_least_recently_used_go_first_beyond_the_cap() -> None:
    m: BoundedMap[str, int] = BoundedMap(max_entries=3, idle_ttl_s=60, clock=Clock())
    for key in "abc":
        m.set(key, ord(key))
    assert m.get("a") == ord("a")  # used: now the newest
    m.set("d", 4)
    assert list(m) == ["c", "a", "d"]
    assert "b" not in m and len(m) == 3


def test_idle_entries_expire_on_the_next_insert() -> None:
    clock = Clock()
    m: BoundedMap[str, int] = BoundedMap(max_entries=100, idle_ttl_s=60, clock=clock)
    m.set("old", 1)
    clock.now += 30
    m.set("younger", 2)
    clock.now += 31  # "old" idle 61 s, "younger" 31 s
    m.set("new", 3)
    assert sorted(m) == ["new", "younger"]


def test_peek_does_not_count_as_use() -> None:
    clock = Clock()
    m: BoundedMap[str, int] = BoundedMap(max_entries=100, idle_ttl_s=60, clock=clock)
    m.set("a", 1)
    m.set("b", 2)
    clock.now += 50
    assert m.peek("a") == 1
    assert m.get("b") == 2
    clock.now += 20
    m.set("c", 3)
    assert sorted(m) == ["b", "c"]


def test_entries_in_use_survive_ttl_and_cap() -> None:
    clock = Clock()
    pinned = {"busy"}
    m: BoundedMap[str, int] = BoundedMap(max_entries=2, idle_ttl_s=60, in_use=lambda k, _v: k in pinned, clock=clock)
    m.set("busy", 0)
    clock.now += 600
    for i in range(10):
        m.set(f"k{i}", i)
    assert "busy" in m and len(m) == 2
    pinned.clear()  # no longer in use: evicted by the next pressure
    clock.now += 600
    m.set("x", 1)
    m.set("y", 2)
    assert sorted(m) == ["x", "y"]


def test_all_in_use_the_cap_is_soft_and_inserts_stay_cheap() -> None:
    m: BoundedMap[int, int] = BoundedMap(max_entries=10, idle_ttl_s=60, in_use=lambda _k, _v: True, clock=Clock())
    for i in range(1000):
        m.set(i, i)
    assert len(m) == 1000


def test_get_or_create_and_pop() -> None:
    m: BoundedMap[str, list[int]] = BoundedMap(clock=Clock())
    m.get_or_create("a", list).append(1)
    m.get_or_create("a", list).append(2)
    assert m.peek("a") == [1, 2]
    assert m.pop("a") == [1, 2] and m.pop("a") is None and len(m) == 0


@pytest.mark.parametrize(("max_entries", "ttl"), [(0, 60.0), (10, 0.0), (10, -1.0)])
def test_bad_bounds_are_refused(max_entries: int, ttl: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        BoundedMap(max_entries=max_entries, idle_ttl_s=ttl)


def test_the_entry_just_set_is_never_the_one_evicted() -> None:
    busy = {"a", "b", "c"}
    m: BoundedMap[str, int] = BoundedMap(max_entries=2, idle_ttl_s=60, in_use=lambda k, _v: k in busy, clock=Clock())
    for key in "abc":
        m.set(key, 0)
    m.set("new", 1)  # over the cap, every older entry in use: the cap gives, the new entry stays
    assert m.peek("new") == 1 and len(m) == 4


def test_recent_ids_tell_a_first_sighting_and_forget_the_oldest_beyond_the_limit() -> None:
    ids: RecentIds[str] = RecentIds(limit=2)
    assert ids.add("a") is True
    assert ids.add("a") is False  # seen: a repeat, and not made newer by it
    assert ids.add("b") is True
    assert ids.add("c") is True  # "a" is pushed out
    assert "a" not in ids and "b" in ids and "c" in ids and len(ids) == 2
    assert ids.add("a") is True
    with pytest.raises(ValueError):
        RecentIds(limit=0)


def test_a_forgotten_id_is_a_first_sighting_again():
    ids: RecentIds[str] = RecentIds(3)
    assert ids.add("a") and not ids.add("a")
    ids.forget("a")
    ids.forget("never seen")  # nothing to forget: no error
    assert "a" not in ids and ids.add("a") and len(ids) == 1
