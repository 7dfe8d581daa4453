"""Chaos helpers for broker loss: the five services as `agentstream serve` processes on an
embedded broker this test owns (a fixed port, so a restarted broker is found where the
clients look)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from agentstream.config import SERVICES, Settings
from agentstream.kafka import EmbeddedBroker, create_topics, free_port
from agentstream_testing.fixtures import ADMIN_HEADERS
from tests.chaos.processes import service_env
from tests.e2e.processes import spawn, stop

HEALTH_INTERVAL_S = "0.5"


class Stack:
    def __init__(self, settings: Settings, workdir: Path, services: tuple[str, ...] = SERVICES, **config: Any) -> None:
        self.env = service_env(settings, kafka__health_interval_s=HEALTH_INTERVAL_S, **config)
        self.workdir = workdir
        self.ports = {name: free_port() for name in services}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.sizes_at_stop: dict[str, int] = {}

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def start(self) -> None:
        self.procs = {
            name: spawn(["serve", name, "--port", str(port)], self.env, self.workdir, self.log(name))
            for name, port in self.ports.items()
        }

    def kill9(self, name: str) -> None:
        """SIGKILL to one service's whole process group, reaped."""
        proc = self.procs[name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def restart(self, name: str, tag: str) -> None:
        """The service again, on its port, logging to `<name>-<tag>.log` (the first log is kept)."""
        log = self.workdir / f"{name}-{tag}.log"
        self.procs[name] = spawn(["serve", name, "--port", str(self.ports[name])], self.env, self.workdir, log)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    async def readiness(self, http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for name in self.ports:
            assert self.procs[name].poll() is None, self.log(name).read_text()[-3000:]
            try:
                out[name] = (await http.get(f"{self.url(name)}/readyz")).json()
            except httpx.TransportError as err:
                out[name] = {"ready": False, "reasons": {"http": repr(err)}}
        return out

    async def wait(self, ready: bool, timeout: float) -> dict[str, dict[str, Any]]:
        """Until every service's `/readyz` says `ready`; returns the last answers."""
        states: dict[str, dict[str, Any]] = {}
        try:
            async with httpx.AsyncClient(timeout=5) as http, asyncio.timeout(timeout):
                while True:
                    states = await self.readiness(http)
                    if all(s["ready"] is ready for s in states.values()):
                        return states
                    await asyncio.sleep(0.2)
        except TimeoutError:
            # Which service never got there, and why: the bare timeout said nothing.
            raise TimeoutError(f"not ready={ready} after {timeout} s: {states}") from None

    def log_sizes(self) -> dict[str, int]:
        return {name: self.log(name).stat().st_size for name in self.ports}

    def lines_since(self, sizes: dict[str, int]) -> dict[str, int]:
        return {name: len(self.log(name).read_bytes()[sizes[name] :].splitlines()) for name in self.ports}

    def terminate(self) -> dict[str, int | None]:
        """SIGTERM every service at once; each one's exit code, None for one still running after
        30 s (then killed). A service's stop is bounded at 10 s by its own timeouts: 30 s is only
        how long the test waits for that, generous for a loaded machine."""
        t0 = time.monotonic()
        self.sizes_at_stop = self.log_sizes()
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, 30 - (time.monotonic() - t0)))
            codes[name] = proc.returncode
        for proc in self.procs.values():
            stop(proc, timeout=1)
        return codes

    def stop_logs(self, codes: dict[str, int | None]) -> str:
        """What each service that did not stop by itself logged after its SIGTERM: why it hung."""
        return "\n".join(
            f"--- {name} after SIGTERM:\n" + self.log(name).read_bytes()[self.sizes_at_stop[name] :].decode()[-6000:]
            for name, code in codes.items()
            if code is None
        )


async def post(http: httpx.AsyncClient, ingress_url: str, chat: str, message_id: str | None = None) -> httpx.Response:
    body = {"platform": "memory", "chat_id": chat, "user": {"id": f"user-{chat}"}, "text": "calculate 6*7"}
    if message_id is not None:
        body["id"] = message_id
    return await http.post(f"{ingress_url}/v1/messages", headers=ADMIN_HEADERS, json=body)


async def chat_texts(http: httpx.AsyncClient, delivery_url: str, chat: str) -> list[str]:
    resp = await http.get(f"{delivery_url}/v1/memory/chats/{chat}", headers=ADMIN_HEADERS)
    return [m["text"] for m in resp.json()["messages"]] if resp.status_code == 200 else []


async def restart_broker(port: int, log: Path, settings: Settings) -> EmbeddedBroker:
    """A new broker where the old one was, its topics created at once, as whoever restarts an
    embedded broker does (docs/deploy.md): the consumers' metadata requests name their topics,
    and Tansu would create those with its own partition count before the services' check
    creates them with the configured one. The services' producers hold their output until
    they see every topic themselves (`agentstream.kafka.producer.OutputGate`)."""
    broker = EmbeddedBroker(port=port, log_file=log)
    deadline = time.monotonic() + 30
    while True:  # the old socket may linger a moment
        try:
            await asyncio.to_thread(broker.start)
            break
        except (RuntimeError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    await create_topics(settings.kafka)
    return broker
