"""Transport retries for model calls: which failures, how long to wait.

The SDKs' own retries are switched off (`max_retries=0`) so the policy is ours,
explicit and tested: 429/500/502/503/504, timeouts and connection errors are
retried (3 attempts in all), honouring `Retry-After`; any other 4xx (a request
the server rejects as invalid) never is. Only the opening of a stream is retried:
once text has streamed to the user, a retry would repeat it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar

from agentstream.contracts import utcnow
from agentstream_runner.outcome import RunFailure

T = TypeVar("T")
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class LLMError(RunFailure):
    """The model call failed for good; the run fails with this text."""


@dataclass(frozen=True)
class Transient(Exception):
    """A failure worth another attempt (mapped from an SDK error by the connector)."""

    description: str
    retry_after_s: float | None = None


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Pause before attempt `attempt + 1`: the server's Retry-After, else exponential backoff."""
        if retry_after_s is not None:
            return min(max(0.0, retry_after_s), self.max_delay_s)
        return min(self.base_delay_s * 2 ** (attempt - 1), self.max_delay_s)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """`Retry-After` (or `retry-after-ms`) as seconds; None when absent or unreadable."""
    if not headers:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return (parsedate_to_datetime(value) - utcnow()).total_seconds()
    except (TypeError, ValueError):
        return None


async def with_retries(
    attempt_fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: Callable[[], None] | None = None,
) -> T:
    """Run `attempt_fn` until it returns or raises something other than `Transient`;
    `on_retry` is told before each further attempt (the runner counts them)."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return await attempt_fn()
        except Transient as err:
            if attempt == policy.attempts:
                raise LLMError(f"model call failed after {attempt} attempts: {err.description}") from None
            if on_retry is not None:
                on_retry()
            await sleep(policy.delay(attempt, err.retry_after_s))
    raise AssertionError("unreachable")  # the loop returns or raises
