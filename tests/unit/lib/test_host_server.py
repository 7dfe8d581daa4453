"""The host's uvicorn server ticks once a second when idle, and still stops at once when told to."""

from __future__ import annotations

import asyncio
import time

import uvicorn
from fastapi import FastAPI

from agentstream.host import TICK_S, _QuietServer
from agentstream.kafka import free_port
from agentstream.lifecycle import serve_until_started


async def test_an_idle_server_ticks_once_a_second_and_exits_at_once() -> None:
    server = _QuietServer(uvicorn.Config(FastAPI(), host="127.0.0.1", port=free_port(), log_config=None))
    ticks: list[int] = []
    on_tick = server.on_tick

    async def counting(counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(counter)

    server.on_tick = counting  # type: ignore[method-assign]
    task = await serve_until_started(server, "http-test")
    started = time.monotonic()
    await asyncio.sleep(2.5 * TICK_S)
    # uvicorn's own loop would have ticked ~25 times; every tick refreshes the Date header. Bounded by
    # the time that really passed (a loaded machine oversleeps), never by the time asked for.
    ticked = len(ticks)
    elapsed = time.monotonic() - started
    assert 2 <= ticked <= elapsed / TICK_S + 1 and all(t % 10 == 0 for t in ticks), (ticks, elapsed)
    asked = time.monotonic()
    server.should_exit = True
    await asyncio.wait_for(task, 5)
    # At once: woken by the exit, not by the next tick, so no tick runs between the request and the exit.
    assert len(ticks) <= ticked + 1, ticks
    assert time.monotonic() - asked < TICK_S
    assert server.should_exit
