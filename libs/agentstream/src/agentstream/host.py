"""Run one or more services in this process: HTTP servers first, then brokers.

`/healthz` answers as soon as the HTTP server is up; `/readyz` turns ready when the
broker has joined its group. Shutdown runs in reverse order, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import traceback
from collections.abc import Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn, TypeVar, cast

import uvicorn

from agentstream.lifecycle import StartStop, serve_until_started
from agentstream.observability import get_logger
from agentstream.service import Service

STOP_BACKSTOP_S = 9.0
LEFTOVER_S = 2.0  # what is still running once the services stopped: cancelled, then this long to end

T = TypeVar("T")


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
        # Each stop bounds its own steps; this is the backstop for a step that does not. Not a timeout
        # around them: a step that swallows its cancellation (aiokafka's consumer stop can) would hold
        # that too. A stop still running is left; the process's end bounds it (`run_until_stopped`).
        stops = [asyncio.create_task(s.stop(), name=f"stop-{s.name}") for s in reversed(self._started)]
        _, stuck = await asyncio.wait(stops, timeout=STOP_BACKSTOP_S) if stops else (set(), set())
        if stuck:
            get_logger("agentstream.host").warning(
                "services did not stop in time; abandoning them",
                services=sorted(t.get_name().removeprefix("stop-") for t in stuck),
                timeout_s=STOP_BACKSTOP_S,
            )
        for task in stops:
            if task.done() and not task.cancelled() and task.exception() is not None:
                get_logger("agentstream.host").error(
                    "stop failed", service=task.get_name().removeprefix("stop-"), error=repr(task.exception())
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


def run_until_stopped(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` with an end as bounded as every stop step before it. asyncio.run cancels
    the tasks still running and waits for them without limit, and then for the default executor's
    threads: an aiokafka consumer left stopping against a lost cluster does not always give way to a
    cancellation, and held a SIGTERM-ed runner forever. Here each gets LEFTOVER_S; a task still
    running is named in the log and left; a thread still busy (the executor's, or any other the
    interpreter's exit would join) ends the process without it, with the exit code `main` ended with."""
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(thread_name_prefix="asyncio")  # ours: its shutdown can be bounded
    loop.set_default_executor(executor)
    try:
        result = loop.run_until_complete(main)
    except BaseException as exc:
        if not _close(loop, executor):
            traceback.print_exception(exc)
            _exit_now(_exit_code(exc))
        raise
    if not _close(loop, executor):
        _exit_now(result if isinstance(result, int) else 0)
    return result


def _close(loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor) -> bool:
    try:
        return loop.run_until_complete(_end_leftovers(loop, executor))
    finally:
        loop.close()


def _exit_code(exc: BaseException) -> int:
    code = exc.code if isinstance(exc, SystemExit) else getattr(exc, "exit_code", 1)  # click's Exit
    return code if isinstance(code, int) else 1


def _exit_now(code: int) -> NoReturn:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


async def _end_leftovers(loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor) -> bool:
    """Cancel the tasks left, give them and the default executor LEFTOVER_S each; False when the
    executor's threads had not ended."""
    log = get_logger("agentstream.host")
    left = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
    for task in left:
        task.cancel()
    if left:
        _, stuck = await asyncio.wait(left, timeout=LEFTOVER_S)
        if stuck:
            log.warning(
                "tasks did not end on cancel; left behind",
                tasks=sorted(t.get_name() for t in stuck),
                at=sorted({_where(t) for t in stuck}),
                timeout_s=LEFTOVER_S,
            )
        for task in left:
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("task failed on the way out", task=task.get_name(), error=repr(task.exception()))
    await loop.shutdown_asyncgens()
    # Not loop.shutdown_default_executor: it joins its helper thread on the loop, cancelled or not.
    ended = threading.Event()

    def shut() -> None:
        executor.shutdown(wait=True)
        ended.set()

    threading.Thread(target=shut, daemon=True).start()
    for _ in range(int(LEFTOVER_S / 0.05)):
        if ended.is_set() and not _stray_threads():
            return True
        await asyncio.sleep(0.05)
    if ended.is_set() and not (stray := _stray_threads()):
        return True
    log.warning(
        "threads did not end; exiting without them",
        threads=sorted(t.name for t in stray) if ended.is_set() else ["default executor"],
        timeout_s=LEFTOVER_S,
    )
    return False


def _stray_threads() -> list[threading.Thread]:
    """Threads the interpreter's exit would join, other than this one: a library's own worker (an
    aiosqlite connection's thread, alive until its engine is disposed — a step an abandoned stop never
    reached) would hold the process forever."""
    here = threading.current_thread()
    return [t for t in threading.enumerate() if t.is_alive() and not t.daemon and t is not here]


def _where(task: asyncio.Task[Any]) -> str:
    """The innermost frame a task waits in (down its await chain): what did not give way."""
    where, step = "?", cast(Any, task.get_coro())
    while step is not None:
        frame = getattr(step, "cr_frame", None) or getattr(step, "gi_frame", None)
        if frame is not None:
            where = f"{frame.f_code.co_filename}:{frame.f_lineno}"
        step = getattr(step, "cr_await", None) or getattr(step, "gi_yieldfrom", None)
    return where
