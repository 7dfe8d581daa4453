"""StartStop stops what a failed start left running; serve_until_started raises when the
server ends before it started instead of waiting forever; a LoopbackServer stops when told."""

from __future__ import annotations

import socket

import httpx
import pytest
import uvicorn

from agentstream.lifecycle import StartStop, serve_until_started
from agentstream_testing.loopback_server import LoopbackServer


class Recorder(StartStop):
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.steps: list[str] = []

    async def start(self) -> None:
        self.steps.append("start")
        if self.fail:
            raise RuntimeError("half started")

    async def stop(self) -> None:
        self.steps.append("stop")


async def test_a_started_thing_is_stopped_on_exit() -> None:
    thing = Recorder(fail=False)
    async with thing as entered:
        assert entered is thing
        assert thing.steps == ["start"]
    assert thing.steps == ["start", "stop"]


async def test_a_failed_start_is_stopped_and_raises() -> None:
    thing = Recorder(fail=True)
    with pytest.raises(RuntimeError, match="half started"):
        async with thing:
            pytest.fail("entered after a failed start")
    assert thing.steps == ["start", "stop"]


async def _ok(scope: dict[str, object], receive: object, send: object) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b""})  # type: ignore[operator]


class _GivesUp(uvicorn.Server):
    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        return None  # ends without ever starting, as a server whose startup failed


async def test_a_server_that_ends_before_starting_raises_instead_of_waiting() -> None:
    server = _GivesUp(uvicorn.Config(_ok, lifespan="off"))
    with pytest.raises(RuntimeError, match="gives-up stopped during startup"):
        await serve_until_started(server, "gives-up")


async def test_a_loopback_server_answers_until_stopped() -> None:
    server = LoopbackServer(_ok, "ok")
    port = await server.start()
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"http://127.0.0.1:{port}/")).status_code == 204
    await server.stop()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/")
