"""Step 5: a token bucket per user. In-process: each ingress replica limits what it sees,
and a conversation's records always land on the same replica (keyed partitions)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agentstream.config.ingress import RateLimitSettings

MAX_TRACKED = 100_000


@dataclass
class TokenBucket:
    capacity: float
    refill_per_s: float
    tokens: float
    updated: float

    def take(self, now: float) -> bool:
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.refill_per_s)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class RateLimiter:
    def __init__(self, settings: RateLimitSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def allow(self, platform: str, user_id: str) -> bool:
        if not self.settings.enabled:
            return True
        now = self.clock()
        key = (platform, user_id)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED:
                self._forget_full(now)
            bucket = self._buckets[key] = TokenBucket(self.settings.capacity, self.settings.refill_per_s,
                                                       self.settings.capacity, now)
        return bucket.take(now)

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled completely: forgetting them changes nothing."""
        s = self.settings
        self._buckets = {k: b for k, b in self._buckets.items()
                         if b.tokens + (now - b.updated) * s.refill_per_s < s.capacity}
