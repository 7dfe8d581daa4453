"""Run one or more services in this process: HTTP servers first, then brokers.

`/healthz` answers as soon as the HTTP server is up; `/readyz` turns ready when the
broker has joined its group. Shutdown runs in reverse order, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator, Sequence

import uvicorn

from agentstream.lifecycle import StartStop, serve_until_started
from agentstream.observability import get_logger
from agentstream.service import Service

STOP_BACKSTOP_S = 9.0


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers (the host owns shutdown), ticking once a second
    rather than ten times: uvicorn's own loop polls `should_exit` every 0.1 s, and five idle
    services woke the event loop 50 times a second for it. An exit wakes the loop at once."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._exit = asyncio.Event()  # before uvicorn's __init__ assigns should_exit
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._exit.is_set()

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        if value:
            self._exit.set()
        else:
            self._exit.clear()

    async def main_loop(self) -> None:
        counter = 0  # on_tick refreshes the Date header when counter % 10 == 0: every tick here
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._exit.wait(), TICK_S)
            should_exit = await self.on_tick(counter)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


TICK_S = 1.0


class ServiceHost(StartStop):
    def __init__(self, services: Sequence[Service], http_host: str, ports: dict[str, int]) -> None:
        self.services = list(services)
        self.http_host = http_host
        self.ports = ports
        self._servers: list[tuple[_QuietServer, asyncio.Task[None]]] = []
        self._started: list[Service] = []

    def url(self, service: str) -> str:
        return f"http://{self.http_host}:{self.ports[service]}"

    async def start(self) -> None:
        for svc in self.services:
            port = self.ports[svc.name]
            cfg = uvicorn.Config(
                svc.http, host=self.http_host, port=port, log_config=None, lifespan="off", access_log=False
            )
            server = _QuietServer(cfg)
            self._servers.append((server, await serve_until_started(server, f"http-{svc.name}")))
        # Group joins take seconds (Tansu ~5 s): start every broker concurrently.
        results = await asyncio.gather(*(svc.start() for svc in self.services), return_exceptions=True)
        self._started = [s for s, r in zip(self.services, results, strict=True) if not isinstance(r, BaseException)]
        for r in results:
            if isinstance(r, BaseException):
                raise r

    async def stop(self) -> None:
        # First what runs finishes (each service's shutdown.grace_s), then the stops.
        drained = await asyncio.gather(
            *(s.drain(s.settings.shutdown.grace_s) for s in self._started), return_exceptions=True
        )
        for svc, result in zip(self._started, drained, strict=True):
            if isinstance(result, BaseException):  # the stop goes on: what runs is cut, as without a drain
                get_logger("agentstream.host").error("drain failed", service=svc.name, error=repr(result))
        try:
            # Each stop bounds its own steps; this is the backstop for a step that does not.
            async with asyncio.timeout(STOP_BACKSTOP_S):
                await asyncio.gather(*(s.stop() for s in reversed(self._started)), return_exceptions=True)
        except TimeoutError:
            get_logger("agentstream.host").warning(
                "services did not stop in time; abandoning them", timeout_s=STOP_BACKSTOP_S
            )
        self._started = []
        for server, _ in self._servers:
            server.should_exit = True
        await asyncio.gather(*(t for _, t in self._servers), return_exceptions=True)
        self._servers = []


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGINT and SIGTERM set `stop` (a second SIGINT still interrupts hard)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
