"""A mapping for per-chat (per-key) state that forgets idle entries.

Services keep small state per chat, user or conversation; with no eviction a long-lived
process grows with every distinct key it ever saw. `BoundedMap` drops an entry once it
has been idle for `idle_ttl_s`, and the least recently used ones once it holds more than
`max_entries` — except entries `in_use(key, value)` says are still needed (an open
stream, a pending deadline): those stay, so the cap is soft for them by design.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_IDLE_TTL_S = 600.0
# Entries in use met during one sweep before it gives up: keeps an insert O(1) amortised
# even when many entries are pinned.
_MAX_PINNED_SCAN = 64


def _never(_key: object, _value: object) -> bool:
    return False


class BoundedMap(Generic[K, V]):
    """LRU + idle-TTL mapping; `get`/`set` count as use, `peek` does not."""

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        idle_ttl_s: float = DEFAULT_IDLE_TTL_S,
        in_use: Callable[[K, V], bool] = _never,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        if idle_ttl_s <= 0:
            raise ValueError(f"idle_ttl_s must be positive, got {idle_ttl_s}")
        self.max_entries = max_entries
        self.idle_ttl_s = idle_ttl_s
        self._in_use = in_use
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()  # oldest use first

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._entries))

    def values(self) -> list[V]:
        return [v for _, v in self._entries.values()]

    def peek(self, key: K) -> V | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[1]

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries[key] = (self._clock(), entry[1])
        self._entries.move_to_end(key)
        return entry[1]

    def set(self, key: K, value: V) -> None:
        self._entries[key] = (self._clock(), value)
        self._entries.move_to_end(key)
        self.sweep(keep=key)

    def get_or_create(self, key: K, factory: Callable[[], V]) -> V:
        value = self.get(key)
        if value is None:
            value = factory()
            self.set(key, value)
        return value

    def pop(self, key: K) -> V | None:
        entry = self._entries.pop(key, None)
        return None if entry is None else entry[1]

    def sweep(self, keep: K | None = None) -> int:
        """Evicts expired and over-cap entries from the oldest end, never `keep`; returns how many."""
        now = self._clock()
        evicted = pinned = 0
        while self._entries and pinned < _MAX_PINNED_SCAN:
            key, (used_at, value) = next(iter(self._entries.items()))
            if key == keep:
                break  # every entry older than the one just set was looked at
            over_cap = len(self._entries) > self.max_entries
            if not over_cap and now - used_at < self.idle_ttl_s:
                break  # the oldest entry is fresh and there is room: so is everything after it
            if self._in_use(key, value):
                # Still needed: counts as used now, so the sweep moves on to the next oldest.
                self._entries[key] = (now, value)
                self._entries.move_to_end(key)
                pinned += 1
                continue
            del self._entries[key]
            evicted += 1
        return evicted


class RecentIds(Generic[K]):
    """The last `limit` ids seen, oldest forgotten first (no idle expiry: an id is
    remembered however long ago it came, until `limit` newer ones pushed it out)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self._ids: OrderedDict[K, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: object) -> bool:
        return key in self._ids

    def add(self, key: K) -> bool:
        """Remember `key`; True when it was not remembered yet (its first sighting)."""
        if key in self._ids:
            return False
        self._ids[key] = None
        if len(self._ids) > self.limit:
            self._ids.popitem(last=False)
        return True

    def forget(self, key: K) -> None:
        """`key` is not remembered any more: its next sighting is a first one."""
        self._ids.pop(key, None)
