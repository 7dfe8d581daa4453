"""Starting and stopping what runs in the background of this event loop.

`StartStop` makes anything with `start()` and `stop()` an async context manager that
leaves nothing running when `start` fails halfway (its `stop` must cope with a partial
start). `serve_until_started` runs a uvicorn server in a task and returns once it
accepts connections, raising the startup error (a taken port) instead of hanging.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Self

import uvicorn


class StartStop:
    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_until_started(
    server: uvicorn.Server, name: str, sockets: list[socket.socket] | None = None
) -> asyncio.Task[None]:
    """`server.serve()` in a task named `name`, once the server has started; the caller stops
    it with `server.should_exit = True` and awaits the task."""
    task = asyncio.create_task(server.serve(sockets=sockets), name=name)
    try:
        while not server.started:
            if task.done():
                task.result()  # raises the startup error
                raise RuntimeError(f"HTTP server {name} stopped during startup")
            await asyncio.sleep(0.01)
    except BaseException:
        task.cancel()  # cancelled while starting: no server is left behind
        raise
    return task
