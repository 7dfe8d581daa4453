"""The host's uvicorn server ticks once a second when idle, and still stops at once when told to."""

from __future__ import annotations

import asyncio
import time

import pytest
import uvicorn
from fastapi import FastAPI
from structlog.testing import capture_logs

from agentstream.config import Settings
from agentstream.host import TICK_S, ServiceHost, _QuietServer
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


class StubbornStop:
    """A service whose stop swallows its cancellation and waits on (aiokafka's consumer stop can)."""

    name = "stubborn"

    def __init__(self) -> None:
        self.http = FastAPI()
        self.settings = Settings()
        self.released = asyncio.Event()
        self.cancels = 0

    async def start(self) -> None:
        pass

    async def drain(self, grace_s: float) -> None:
        pass

    async def stop(self) -> None:
        while not self.released.is_set():
            try:
                await self.released.wait()
            except asyncio.CancelledError:
                self.cancels += 1


async def test_a_stop_that_swallows_its_cancellation_is_abandoned_at_the_backstop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A timeout around the stops cancelled them and then waited for them: a stop that swallows the
    cancellation held the host, and the SIGTERM-ed process, past its bound."""
    monkeypatch.setattr("agentstream.host.STOP_BACKSTOP_S", 0.3)
    svc = StubbornStop()
    host = ServiceHost([svc], "127.0.0.1", {svc.name: free_port()})  # type: ignore[list-item]
    await host.start()
    with capture_logs() as logs:
        await asyncio.wait_for(host.stop(), 10)
    assert [(line["event"], line.get("services")) for line in logs if line["log_level"] == "warning"] == [
        ("services did not stop in time; abandoning them", ["stubborn"])
    ]
    (stuck,) = [t for t in asyncio.all_tasks() if t.get_name() == "stop-stubborn"]  # left running, not awaited
    svc.released.set()
    await stuck


async def test_a_second_stop_does_nothing() -> None:
    """A test stops the host itself and then leaves its `async with`: the second stop has no service left."""
    svc = StubbornStop()
    svc.released.set()  # stops at once
    host = ServiceHost([svc], "127.0.0.1", {svc.name: free_port()})  # type: ignore[list-item]
    async with host:
        await host.stop()
    assert svc.cancels == 0
