"""The transport retry policy of model calls: which waits, how many attempts, what the run sees at the end."""

from __future__ import annotations

from datetime import timedelta
from email.utils import format_datetime

import pytest

from agentstream.contracts import utcnow
from agentstream_runner.connectors.retry import (
    RETRYABLE_STATUS,
    LLMError,
    RetryPolicy,
    Transient,
    retry_after_seconds,
    with_retries,
)


def test_the_retried_statuses_are_rate_limits_and_server_errors():
    assert {429, 500, 502, 503, 504} == RETRYABLE_STATUS


def test_the_default_policy_is_three_attempts_with_backoff_from_half_a_second_up_to_twenty():
    policy = RetryPolicy()
    assert (policy.attempts, policy.base_delay_s, policy.max_delay_s) == (3, 0.5, 20.0)


def test_backoff_doubles_per_attempt_and_is_capped():
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=3.0)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]


def test_retry_after_is_honoured_but_never_negative_nor_above_the_cap():
    policy = RetryPolicy(max_delay_s=10.0)
    assert policy.delay(3, 2.5) == 2.5
    assert policy.delay(1, -4.0) == 0.0
    assert policy.delay(1, 60.0) == 10.0


def test_retry_after_headers_in_seconds_milliseconds_and_dates():
    assert retry_after_seconds(None) is None and retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "1.5"}) == 1.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0  # unreadable ms: the other
    assert retry_after_seconds({"retry-after-ms": "soon"}) is None
    assert retry_after_seconds({"other": "1"}) is None
    later = format_datetime(utcnow() + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after_seconds({"retry-after": later}) <= 30  # type: ignore[operator]
    assert retry_after_seconds({"retry-after": "soon"}) is None


class Attempts:
    """Fails with the given errors in turn, then answers."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"


class Sleeps(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


async def test_a_first_answer_is_returned_without_waiting():
    attempts, sleeps = Attempts(), Sleeps()
    assert await with_retries(attempts, RetryPolicy(), sleeps) == "answer"
    assert (attempts.calls, sleeps) == (1, [])


async def test_transient_failures_are_retried_with_the_policys_waits():
    attempts, sleeps = Attempts(Transient("503"), Transient("429", retry_after_s=4.0)), Sleeps()
    assert await with_retries(attempts, RetryPolicy(), sleeps) == "answer"
    assert (attempts.calls, sleeps) == (3, [0.5, 4.0])


async def test_the_last_transient_failure_fails_the_run_with_its_description():
    attempts, sleeps = Attempts(*(Transient(f"boom {n}") for n in range(5))), Sleeps()
    with pytest.raises(LLMError, match=r"^model call failed after 3 attempts: boom 2$") as failed:
        await with_retries(attempts, RetryPolicy(), sleeps)
    assert failed.value.__suppress_context__ and failed.value.__cause__ is None
    assert (attempts.calls, sleeps) == (3, [0.5, 1.0])


async def test_a_single_attempt_policy_never_waits():
    attempts, sleeps = Attempts(Transient("timeout")), Sleeps()
    with pytest.raises(LLMError, match="after 1 attempts: timeout"):
        await with_retries(attempts, RetryPolicy(attempts=1), sleeps)
    assert sleeps == []


async def test_other_errors_are_not_retried():
    attempts, sleeps = Attempts(ValueError("400 bad request")), Sleeps()
    with pytest.raises(ValueError, match="400 bad request"):
        await with_retries(attempts, RetryPolicy(), sleeps)
    assert (attempts.calls, sleeps) == (1, [])


async def test_the_default_sleep_really_waits():
    attempts = Attempts(Transient("503"))
    assert await with_retries(attempts, RetryPolicy(base_delay_s=0.01)) == "answer"
