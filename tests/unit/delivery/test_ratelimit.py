"""The chat gate: a 429 schedules the chat's next call after retry_after; successes shorten the gap again."""

from __future__ import annotations

import asyncio

import pytest

from agentstream_delivery.ratelimit import PREVIEW_RESERVE, ChatGate


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_gate_schedules_after_retry_after_and_recovers_after_successes(monkeypatch: pytest.MonkeyPatch):
    clock = FakeClock()
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(round(delay, 3))
        clock.now += delay

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    gate = ChatGate(min_gap=1.0, clock=clock)
    await gate.acquire()
    await gate.acquire()
    assert slept == [1.0]  # the per-chat spacing
    assert gate.rate_limited(3.0) == 1
    await gate.acquire()
    assert slept[-1] == 3.0  # nothing before retry_after
    assert gate.gap == 2.0  # backed off
    gate.rate_limited(0.1)
    gate.rate_limited(0.1)
    assert gate.exhausted
    for _ in range(5):
        gate.succeeded()
    assert gate.strikes == 0 and gate.gap == 1.0


async def test_previews_leave_a_reserve_of_the_budget_for_the_final():
    clock = FakeClock()
    gate = ChatGate(min_gap=1.0, clock=clock)
    await gate.acquire()  # a call at 100.0: the chat's next slot is 101.0
    assert gate.free_at(final=True) == 101.0
    assert gate.free_at(final=False) == 101.0 + PREVIEW_RESERVE
    gate.rate_limited(0.5)  # backed off: the spacing doubles, and so does the reserve
    assert gate.free_at(final=False) - gate.free_at(final=True) == PREVIEW_RESERVE * gate.gap == PREVIEW_RESERVE * 2.0
    unspaced = ChatGate(min_gap=0.0, clock=clock)
    await unspaced.acquire()
    assert unspaced.free_at(final=False) == unspaced.free_at(final=True) == 100.0  # no spacing, no reserve
