"""A TCP proxy on 127.0.0.1 that a test can cut and restore: an outage of whatever is behind it.

While cut, open connections are reset and new ones are accepted and closed at once, as a
database or broker that went away looks to a client; `restore` lets connections through again.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.cut_active = False
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.StreamWriter] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def __aenter__(self) -> TcpProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until `restore`."""
        self.cut_active = True
        for writer in list(self._pipes):
            _abort(writer)
        self._pipes.clear()

    def restore(self) -> None:
        self.cut_active = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.cut_active:
            _abort(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            return
        self._pipes.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                if self.cut_active:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._pipes.discard(writer)
            _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a reset (no orderly FIN): the peer sees the connection break."""
    transport = writer.transport
    with contextlib.suppress(Exception):
        transport.abort()
