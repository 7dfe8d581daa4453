"""ratelimit: a token bucket per user that refills over time; full buckets are forgotten, a limited user's is kept."""

from __future__ import annotations

from agentstream.config.ingress import RateLimitSettings
from agentstream_ingress import ratelimit
from agentstream_ingress.ratelimit import RateLimiter


def test_a_limited_user_stays_limited_under_pressure_and_refilled_buckets_go(monkeypatch) -> None:
    monkeypatch.setattr(ratelimit, "MAX_TRACKED", 10)
    now = [0.0]
    limiter = RateLimiter(RateLimitSettings(capacity=2, refill_per_s=0.01), clock=lambda: now[0])  # 200 s to refill
    assert limiter.allow("p", "spammer") and limiter.allow("p", "spammer")
    assert not limiter.allow("p", "spammer")
    for i in range(100):
        now[0] += 0.01
        assert limiter.allow("p", f"user{i}")  # a new user's bucket is never the one pushed out
    assert not limiter.allow("p", "spammer")  # still empty: forgetting it would have let this through
    now[0] += 400  # every bucket has refilled: forgetting them changes nothing
    limiter.allow("p", "late")
    assert len(limiter) == 1


def test_token_bucket_refills_over_time():
    now = [0.0]
    limiter = RateLimiter(RateLimitSettings(capacity=2, refill_per_s=1.0), clock=lambda: now[0])
    assert [limiter.allow("p", "u") for _ in range(3)] == [True, True, False]
    assert limiter.allow("p", "other")
    now[0] = 0.5
    assert not limiter.allow("p", "u")
    now[0] = 1.6
    assert limiter.allow("p", "u") and not limiter.allow("p", "u")
    assert RateLimiter(RateLimitSettings(enabled=False, capacity=1)).allow("p", "u")


def test_a_disabled_limiter_lets_everything_through_and_tracks_no_one() -> None:
    limiter = RateLimiter(RateLimitSettings(enabled=False, capacity=1, refill_per_s=0.001), clock=lambda: 0.0)
    assert all(limiter.allow("p", "u") for _ in range(50))
    assert len(limiter) == 0


def test_beyond_max_tracked_the_oldest_full_buckets_are_forgotten(monkeypatch) -> None:
    monkeypatch.setattr(ratelimit, "MAX_TRACKED", 5)
    now = [0.0]
    # A used bucket is full again after 1 s but only idle-forgotten after 100 s: the cap does the forgetting here.
    limiter = RateLimiter(RateLimitSettings(capacity=100, refill_per_s=1.0), clock=lambda: now[0])
    for i in range(20):
        now[0] += 1.5
        assert limiter.allow("p", f"user{i}")
    assert len(limiter) == 5


def test_a_bucket_is_forgotten_when_idle_for_as_long_as_it_takes_to_refill_from_empty() -> None:
    now = [0.0]
    limiter = RateLimiter(RateLimitSettings(capacity=2, refill_per_s=0.5), clock=lambda: now[0])  # 4 s empty → full
    limiter.allow("p", "u")
    now[0] = 2.5  # u's bucket is full again, but not idle for 4 s: kept
    limiter.allow("p", "other")
    assert len(limiter) == 2
    now[0] = 4.5  # idle for 4.5 s: forgotten; other (idle 2 s) kept
    limiter.allow("p", "third")
    assert len(limiter) == 2


def test_a_limited_user_stays_limited_when_the_table_is_full_whatever_the_clock_origin(monkeypatch) -> None:
    monkeypatch.setattr(ratelimit, "MAX_TRACKED", 1)
    now = [1000.0]
    limiter = RateLimiter(RateLimitSettings(capacity=1, refill_per_s=0.01), clock=lambda: now[0])  # 100 s to refill
    assert limiter.allow("p", "spammer")
    now[0] += 0.5
    assert limiter.allow("p", "newcomer")  # over the cap, but the spammer's bucket is not full: kept
    assert not limiter.allow("p", "spammer")


def test_a_bucket_exactly_refilled_is_forgotten_when_the_table_is_full(monkeypatch) -> None:
    monkeypatch.setattr(ratelimit, "MAX_TRACKED", 1)
    now = [0.0]
    limiter = RateLimiter(RateLimitSettings(capacity=2, refill_per_s=1.0), clock=lambda: now[0])
    limiter.allow("p", "u")  # one token left, full again at exactly 1 s
    now[0] = 1.0
    limiter.allow("p", "newcomer")
    assert len(limiter) == 1
