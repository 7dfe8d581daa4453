"""How the fakes of external services listen: an ASGI app served by uvicorn on 127.0.0.1,
in the test's own event loop, on a port of its choosing or a free one; and what a raw ASGI
fake (no framework) reads a request body and answers JSON with."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from agentstream.lifecycle import serve_until_started

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class LoopbackServer:
    def __init__(self, app: Callable[..., Any], name: str, *, no_delay: bool = False, **config: Any) -> None:
        self.app = app
        self.name = name
        self.no_delay = no_delay
        self.config = config
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, port: int = 0) -> int:
        """Serve on `port` (0: a free one); returns the port once connections are accepted."""
        sock = socket.socket()
        if self.no_delay:
            # Accepted sockets inherit it (Linux): without it, Nagle holds a small write made right
            # after the headers until the client's delayed ACK (~40 ms), which is not the app's doing.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", port))
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, **self.config
        )
        self._server = uvicorn.Server(config)
        self._task = await serve_until_started(self._server, self.name, sockets=[sock])
        return int(sock.getsockname()[1])

    async def stop(self) -> None:
        server, task, self._server, self._task = self._server, self._task, None, None
        if server is not None and task is not None:
            server.should_exit = True
            await task


async def read_body(receive: Receive) -> bytes:
    """The whole request body, however many `http.request` messages it came in."""
    raw = b""
    while True:
        message = await receive()
        raw += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return raw


async def send_json(send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A complete JSON answer: `status`, `content-type: application/json` and `headers`."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})
