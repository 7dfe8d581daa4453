"""The embedded stack: Tansu + topics + database + all five services in one process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentstream.config import SERVICES, SecurityProtocol, Settings
from agentstream.db import upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import EmbeddedBroker, create_topics, free_port
from agentstream.observability import get_logger
from agentstream.service import Service
from agentstream_stack.services import build_all

STATE_FILE = Path(".agentstream/stack.json")


@dataclass
class RunningStack:
    settings: Settings
    host: ServiceHost
    services: dict[str, Service]
    broker: EmbeddedBroker | None
    urls: dict[str, str] = field(default_factory=dict)
    broker_exit_code: int | None = None  # set when the embedded broker ended on its own

    async def watch_broker(self, stop: asyncio.Event) -> None:
        """Set `stop` if the embedded broker process ends: its memory (topics, records, offsets)
        is gone, so the stack stops instead of serving nothing."""
        if self.broker is None:
            return
        self.broker_exit_code = await self.broker.wait_exit()
        get_logger("agentstream.stack").error(
            "embedded broker exited; stopping the stack", exit_code=self.broker_exit_code, pid=self.broker.pid
        )
        stop.set()

    def describe(self) -> dict[str, Any]:
        return {
            "kafka": self.settings.kafka.bootstrap_servers,
            "broker_pid": self.broker.pid if self.broker else None,
            "topic_prefix": self.settings.kafka.topic_prefix,
            "database": self.settings.database.url,
            "services": self.urls,
        }


def _with_broker(settings: Settings, bootstrap: str) -> Settings:
    # The embedded broker listens in plaintext on loopback only.
    kafka = settings.kafka.model_copy(
        update={"bootstrap_servers": bootstrap, "embedded": True, "security_protocol": SecurityProtocol.PLAINTEXT}
    )
    return settings.model_copy(update={"kafka": kafka})


@asynccontextmanager
async def embedded_stack(
    settings: Settings,
    *,
    start_broker: bool = True,
    ports: dict[str, int] | None = None,
    state_file: Path | None = STATE_FILE,
    broker_log: Path | None = None,
    **delivery_kwargs: Any,
) -> AsyncIterator[RunningStack]:
    """Start everything; stop everything on exit, in reverse, however the block ends."""
    broker = EmbeddedBroker(log_file=broker_log) if start_broker else None
    if broker is not None:
        await broker.__aenter__()
    try:
        if broker is not None:
            settings = _with_broker(settings, broker.bootstrap_servers)
        await create_topics(settings.kafka)
        await upgrade(settings.database.url)
        ports = ports or {name: settings.http.port_for(name) for name in SERVICES}
        services = build_all(settings, **delivery_kwargs)
        host = ServiceHost(services, settings.http.host, ports)
        async with host:
            stack = RunningStack(settings, host, {s.name: s for s in services}, broker,
                                 urls={n: host.url(n) for n in SERVICES})
            if state_file is not None:
                _write_state(state_file, stack.describe())
            try:
                yield stack
            finally:
                if state_file is not None:
                    state_file.unlink(missing_ok=True)  # noqa: ASYNC240 - tiny local file
    finally:
        if broker is not None:
            broker.stop()


def _write_state(state_file: Path, state: dict[str, Any]) -> None:
    """Where `agentstream send` finds the running stack of this directory."""
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(state, indent=2))


def free_ports() -> dict[str, int]:
    return {name: free_port() for name in SERVICES}


def read_state(state_file: Path = STATE_FILE) -> dict[str, Any] | None:
    try:
        return dict(json.loads(state_file.read_text()))
    except (OSError, ValueError):
        return None
