"""Chaos helpers: one service as a real `agentstream serve` child process, killed with SIGKILL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from agentstream.config import Settings
from agentstream_testing.fixtures import ADMIN_TOKEN_ENV, kafka_env
from tests.e2e.processes import spawn, stop

REPO = Path(__file__).resolve().parents[2]


def service_env(settings: Settings, **extra: Any) -> dict[str, str]:
    """The child's configuration, as AGENTSTREAM__ variables (lists and maps as JSON)."""
    env = {
        **kafka_env(settings),
        "AGENTSTREAM__DATABASE__URL": settings.database.url,
        "AGENTSTREAM__SHUTDOWN__GRACE_S": str(settings.shutdown.grace_s),
    }
    for key, value in extra.items():
        env[f"AGENTSTREAM__{key.upper()}"] = value if isinstance(value, str) else json.dumps(value)
    return env


class ServiceProcess:
    """`agentstream serve SERVICE`, or with `module` that Python module run with the port as its
    argument (from the repository, so `tests.…` modules import): a service with a chaos hook."""

    def __init__(
        self, service: str, env: dict[str, str], port: int, workdir: Path, tag: str, module: str | None = None
    ) -> None:
        self.service, self.env, self.port, self.workdir, self.module = service, env, port, workdir, module
        self.log = workdir / f"{service}-{tag}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def spawn(self) -> subprocess.Popen[bytes]:
        if self.module is None:
            return spawn(["serve", self.service, "--port", str(self.port)], self.env, self.workdir, self.log)
        env = {**os.environ, "AGENTSTREAM__AUTH__ADMIN_TOKEN_ENV": ADMIN_TOKEN_ENV, **self.env}
        with open(self.log, "wb") as out:
            return subprocess.Popen(
                [sys.executable, "-m", self.module, str(self.port)],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    async def start(self, timeout: float = 60.0) -> None:
        self.proc = self.spawn()
        last = "no answer"  # what /readyz said last: a start that times out says why
        try:
            async with httpx.AsyncClient(timeout=2) as http, asyncio.timeout(timeout):
                while True:
                    assert self.proc.poll() is None, self.log.read_text()
                    try:
                        answer = await http.get(f"http://127.0.0.1:{self.port}/readyz")
                        if answer.status_code == 200:
                            return
                        last = answer.text
                    except httpx.TransportError as err:
                        last = repr(err)
                    await asyncio.sleep(0.2)
        except TimeoutError:
            raise TimeoutError(f"{self.service} not ready in {timeout} s; /readyz: {last}") from None

    def kill9(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def sigterm(self) -> None:
        """SIGTERM to the service (as Kubernetes stops a pod); returns at once."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    async def exited(self, timeout: float) -> int:
        """The exit code, once the process has ended (`subprocess.TimeoutExpired` after `timeout`)."""
        assert self.proc is not None
        return await asyncio.to_thread(self.proc.wait, timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop(self.proc)
