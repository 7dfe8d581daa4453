"""The embedded stack: Tansu + topics + database + all five services in one process."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentstream.auth import DEFAULT_TENANT
from agentstream.config import SERVICES, KafkaFlavor, SecurityProtocol, Settings
from agentstream.config.delivery import PlatformSettings
from agentstream.db import upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import EmbeddedBroker, create_topics, free_port
from agentstream.kafka.flavor import resolve_flavor
from agentstream.observability import get_logger
from agentstream.service import Service
from agentstream_stack.embedded_auth import forgotten_on_exit, prepare_credentials
from agentstream_stack.services import build_all
from agentstream_stack.state_dir import STATE_DIR, private_dir, private_sqlite

STATE_FILE = STATE_DIR / "stack.json"
LOCAL_CHAT = "local"  # the web chat whose link `agentstream up` prints, and its user
LOCAL_USER = "local"


@dataclass
class RunningStack:
    settings: Settings
    host: ServiceHost
    services: dict[str, Service]
    broker: EmbeddedBroker | None
    urls: dict[str, str] = field(default_factory=dict)
    new_admin_key: str | None = None  # only on the start that made it: shown once, stored nowhere
    config_file: str | None = None  # the --config (or AGENTSTREAM_CONFIG) file it started from, resolved

    def web_link(self, chat_id: str = LOCAL_CHAT, user_id: str = LOCAL_USER) -> str:
        """The web chat page with a fresh session token for `chat_id`."""
        # Imported here: the CLI imports this module, and most commands need no service.
        from agentstream_delivery import DeliveryService
        from agentstream_delivery.adapters.web_http import page_path

        delivery = self.services["delivery"]
        assert isinstance(delivery, DeliveryService)
        token, _ = delivery.web_sessions.issue(chat_id, user_id, DEFAULT_TENANT)
        return self.urls["delivery"].replace("://0.0.0.0:", "://127.0.0.1:") + page_path(chat_id, token)

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
            "config": self.config_file,
            "kafka": self.settings.kafka.bootstrap_servers,
            "broker_pid": self.broker.pid if self.broker else None,
            "topic_prefix": self.settings.kafka.topic_prefix,
            "database": self.settings.database.url,
            "services": self.urls,
        }


def _with_broker(settings: Settings, bootstrap: str) -> Settings:
    # The embedded broker listens in plaintext on loopback only.
    kafka = settings.kafka.model_copy(
        update={
            "bootstrap_servers": bootstrap,
            "in_memory": True,
            "flavor": KafkaFlavor.TANSU,
            "security_protocol": SecurityProtocol.PLAINTEXT,
        }
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
    admin_key: bool = False,
    secrets_dir: Path | None = None,
    config_file: Path | None = None,
    **delivery_kwargs: Any,
) -> AsyncIterator[RunningStack]:
    """Start everything; stop everything on exit, in reverse, however the block ends.

    `admin_key`: make an admin key when the database has none (`RunningStack.new_admin_key`).
    `secrets_dir`: where the web session and tool-call secrets persist (else ones for this process).
    `config_file`: the file the settings came from, written to the state so that a command given the
    same `--config` finds this stack's broker.
    """
    broker = EmbeddedBroker(log_file=broker_log) if start_broker else None
    if broker is not None:
        await broker.__aenter__()
    try:
        if broker is not None:
            settings = _with_broker(settings, broker.bootstrap_servers)
        await create_topics(settings.kafka)
        settings = settings.model_copy(update={"kafka": await resolve_flavor(settings.kafka)})
        private_sqlite(settings.database.url)  # 0600 before SQLite writes a byte (its WAL takes the same mode)
        await upgrade(settings.database.url)
        creds = await prepare_credentials(settings, admin_key=admin_key, state_dir=secrets_dir)
        settings = creds.settings
        ports = ports or {name: settings.http.port_for(name) for name in SERVICES}
        settings = _web_to_this_stack(settings, ports["ingress"], ports["persistence"])
        services = build_all(settings, **delivery_kwargs)
        host = ServiceHost(services, settings.http.host, ports)
        with forgotten_on_exit(creds):
            async with host:
                stack = RunningStack(
                    settings,
                    host,
                    {s.name: s for s in services},
                    broker,
                    urls={n: host.url(n) for n in SERVICES},
                    new_admin_key=creds.new_admin_key,
                    config_file=str(config_file) if config_file else None,  # resolved by the caller
                )
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


def _web_to_this_stack(settings: Settings, ingress_port: int, persistence_port: int) -> Settings:
    """The web page's messages go to this stack's ingress and its history comes from this stack's
    persistence, wherever their ports are (unless configured)."""
    web = settings.platforms.get("web") or PlatformSettings()
    host = "127.0.0.1" if settings.http.host in ("0.0.0.0", "::") else settings.http.host
    web = web.model_copy(
        update={
            "api_url": web.api_url or f"http://{host}:{ingress_port}",
            "history_url": web.history_url or f"http://{host}:{persistence_port}",
        }
    )
    return settings.model_copy(update={"platforms": {**settings.platforms, "web": web}})


def _write_state(state_file: Path, state: dict[str, Any]) -> None:
    """Where `agentstream send` finds the running stack of this directory. Written whole or not at all
    (a temporary file renamed over it): a command reading it meanwhile read an empty file (e2e, load ~9)."""
    private_dir(state_file.parent)
    partial = state_file.with_name(f".{state_file.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(state, indent=2))
    os.replace(partial, state_file)


def free_ports() -> dict[str, int]:
    return {name: free_port() for name in SERVICES}


def read_state(state_file: Path = STATE_FILE) -> dict[str, Any] | None:
    try:
        return dict(json.loads(state_file.read_text()))
    except (OSError, ValueError):
        return None
