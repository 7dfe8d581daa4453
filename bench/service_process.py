"""One agentstream service in its own process, as it is deployed: `agentstream serve NAME`.

Benchmarks run the service under test in a child process so that their own load
generator and reader (the same work the raw baseline does) do not share its event
loop. The child gets a YAML config written from `config` (the same keys as a user's
config file), its HTTP port, and is ready when `/readyz` answers 200.

    async with ServiceProcess("agent-runner", {"kafka": {...}, "connectors": [...]}) as svc:
        ...  # svc.url is http://127.0.0.1:<port>

`command` replaces `-m agentstream_stack serve NAME` (the interpreter's arguments before
`--config/--host/--port`), for a bench's own entry point that serves the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from agentstream.kafka import free_port
from agentstream.lifecycle import StartStop


def base_config(bootstrap: str, embedded: bool, db_url: str) -> dict[str, Any]:
    """What every benchmarked service's config file holds: its broker, fresh topics, its database, quiet logs."""
    return {
        "kafka": {
            "bootstrap_servers": bootstrap,
            "in_memory": embedded,
            "topic_prefix": f"bench-{uuid.uuid4().hex[:6]}.",
        },
        "database": {"url": db_url},
        "log_level": "WARNING",
    }


def child_env() -> dict[str, str]:
    """This environment without `AGENTSTREAM__*`: a child reads its settings from its config file alone."""
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTSTREAM__")}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used so far (Linux `/proc`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` of a child's log, for an error that says why it did not start."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


async def terminate(process: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `grace_s`."""
    if process.returncode is not None:
        return
    process.terminate()
    try:
        await asyncio.wait_for(process.wait(), grace_s)
    except TimeoutError:
        process.kill()
        await process.wait()


def rss_bytes(pid: int) -> int:
    """Resident memory of process `pid` (`VmRSS` in `/proc/<pid>/status`); 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) * 1024


class ServiceProcess(StartStop):
    def __init__(
        self,
        service: str,
        config: dict[str, Any],
        *,
        ready_timeout_s: float = 60.0,
        command: Sequence[str] | None = None,
    ) -> None:
        self.service = service
        self.command = list(command) if command is not None else ["-m", "agentstream_stack", "serve", service]
        self.config = config
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._ready_timeout_s = ready_timeout_s
        self._dir = Path(tempfile.mkdtemp(prefix=f"agentstream-bench-{service}-"))
        self.log_path = self._dir / "service.log"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        config_path = self._dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(self.config))
        env = child_env()
        with self.log_path.open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                *self.command,
                "--config",
                str(config_path),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                stdout=log,
                stderr=log,
                env=env,
            )
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + self._ready_timeout_s
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.returncode is not None:
                    raise RuntimeError(f"{self.service} exited with {self._process.returncode}:\n{self.log_tail()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.url}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise TimeoutError(f"{self.service} not ready after {self._ready_timeout_s:.0f} s:\n{self.log_tail()}")

    def cpu_seconds(self) -> float:
        """User + system CPU time the service process has used so far (Linux `/proc`)."""
        assert self._process is not None
        return cpu_seconds(self._process.pid)

    def rss_bytes(self) -> int:
        """Resident memory of the service process now (Linux `/proc`)."""
        assert self._process is not None
        return rss_bytes(self._process.pid)

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            await terminate(process, 15)
