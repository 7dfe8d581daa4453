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
