"""The host's uvicorn server ticks once a second when idle, and still stops at once when told to."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvicorn
from fastapi import FastAPI

from agentstream.host import TICK_S, _QuietServer
from agentstream.kafka import free_port
from agentstream.lifecycle import serve_until_started


async def counting_server() -> tuple[_QuietServer, list[int], asyncio.Task[None]]:
    """A started idle server, and the counter of every tick it ran, in order."""
    server = _QuietServer(uvicorn.Config(FastAPI(), host="127.0.0.1", port=free_port(), log_config=None))
    ticks: list[int] = []
    on_tick = server.on_tick

    async def counting(counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(counter)

    server.on_tick = counting  # type: ignore[method-assign]
    return server, ticks, await serve_until_started(server, "http-test")


async def test_an_idle_server_ticks_once_a_second() -> None:
    server, ticks, task = await counting_server()
    started = time.monotonic()
    await asyncio.sleep(2.5 * TICK_S)
    # uvicorn's own loop would have ticked ~25 times; every tick refreshes the Date header. Bounded by
    # the time that really passed (a loaded machine oversleeps), never by the time asked for.
    ticked = len(ticks)
    elapsed = time.monotonic() - started
    assert 2 <= ticked <= elapsed / TICK_S + 1 and all(t % 10 == 0 for t in ticks), (ticks, elapsed)
    server.should_exit = True
    await asyncio.wait_for(task, 30)
    assert len(ticks) <= ticked + 1, ticks  # no tick between the request and the exit but the exit's own
    assert server.should_exit


async def test_an_exit_wakes_the_idle_server_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentstream.host.TICK_S", 3600.0)  # no tick would come in this test's time
    server, ticks, task = await counting_server()
    server.should_exit = True
    # Woken by the exit: with an hour between ticks, waiting for the next one would time out here.
    await asyncio.wait_for(task, 30)
    assert ticks in ([0], [0, 10])  # the first tick, then (unless the exit came first) the one it woke
