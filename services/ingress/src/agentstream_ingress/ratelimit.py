"""Rate limit (docs/ingress.md): a token bucket per user. In-process: each ingress replica limits what it sees,
and a conversation's records always land on the same replica (keyed partitions).

A bucket idle long enough to have refilled completely is forgotten: a new full bucket
is the same thing. Beyond `MAX_TRACKED` users the least recently seen full ones go
first; a bucket that is not full (its user is being limited) is kept."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from agentstream.bounded import BoundedMap
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
        refill_s = settings.capacity / settings.refill_per_s  # empty → full
        self._buckets: BoundedMap[tuple[str, str], TokenBucket] = BoundedMap(
            MAX_TRACKED, refill_s, self._limiting, clock
        )

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, platform: str, user_id: str) -> bool:
        if not self.settings.enabled:
            return True
        now = self.clock()
        key = (platform, user_id)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self.settings.capacity, self.settings.refill_per_s, self.settings.capacity, now)
            self._buckets.set(key, bucket)
        return bucket.take(now)

    def _limiting(self, _key: tuple[str, str], bucket: TokenBucket) -> bool:
        """Not refilled completely yet: forgetting it would hand its user a full bucket."""
        return bucket.tokens + (self.clock() - bucket.updated) * bucket.refill_per_s < bucket.capacity
