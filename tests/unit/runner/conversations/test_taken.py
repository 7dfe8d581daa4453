"""Runs another runner took up: what the assignment's scan found, asked for once it is over."""

from __future__ import annotations

import asyncio

import pytest

from agentstream_runner.conversations.taken import TakenRuns


async def test_a_run_about_to_start_waits_for_the_scan_in_progress():
    taken = TakenRuns()
    assert await taken.taken("r1") is False  # no scan: at once
    with taken.scanning() as found:
        asking = asyncio.create_task(taken.taken("r1"))
        await asyncio.sleep(0.01)
        assert not asking.done()
        found.add("r1")
    assert await asking is True
    assert await taken.taken("r2") is False


async def test_a_failed_scan_lets_the_runs_start_with_what_it_found():
    taken = TakenRuns()
    with pytest.raises(TimeoutError), taken.scanning() as found:
        found.add("r1")
        raise TimeoutError
    assert await taken.taken("r1") is True
    assert await taken.taken("r2") is False


async def test_overlapping_scans_hold_until_the_last_is_over():
    taken = TakenRuns()
    with taken.scanning():
        with taken.scanning() as second:
            second.add("r1")
        asking = asyncio.create_task(taken.taken("r1"))
        await asyncio.sleep(0.01)
        assert not asking.done()
    assert await asking is True


async def test_it_remembers_a_bounded_number():
    taken = TakenRuns(known=2)
    with taken.scanning() as found:
        found.update({"r1", "r2", "r3"})
    assert [await taken.taken(r) for r in ("r1", "r2", "r3")].count(True) == 2


async def test_a_resume_asks_how_far_a_begun_resume_got_once_the_scan_is_over():
    taken = TakenRuns(known=2)
    assert await taken.resumed_up_to("r1") is None  # no scan: at once
    with taken.scanning():
        asking = asyncio.create_task(taken.resumed_up_to("r1"))
        await asyncio.sleep(0.01)
        assert not asking.done()
        taken.resume_began("r1", 7)
    assert await asking == 7
    taken.resume_began("r1", 5)  # a later scan that saw less never lowers it
    assert await taken.resumed_up_to("r1") == 7
    taken.resume_began("r2", 3)
    taken.resume_began("r3", 4)  # bounded: the oldest is forgotten
    assert [await taken.resumed_up_to(r) for r in ("r1", "r2", "r3")] == [None, 3, 4]
    assert await taken.taken("r1") is False  # a begun resume is no taken start
