"""Two tenants, `acme` and `beta`, each with a key pinned to the same end user: web user `alice`.

Chat and user ids are the platform's (here, a gateway's), so two tenants may both have an `alice` in
a chat `alice`: what one tenant does there must never reach the other (docs/security.md § Tenants).
The whole in-process stack runs on the session's broker, with the fake OpenAI server as the model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from agentstream.auth import KeyStore, Scope
from agentstream.config import Settings
from agentstream.db import create_engine, session_factory
from agentstream_stack.embedded import RunningStack, embedded_stack, free_ports
from agentstream_testing.fake_openai import FakeOpenAI

TENANTS = ("acme", "beta")
USER = "alice"  # both tenants' keys speak for web user alice, whose direct chat is `alice`


@dataclass(frozen=True)
class TenantStack:
    stack: RunningStack
    model: FakeOpenAI
    keys: dict[str, str]  # tenant → API key (messages:write, pinned to web/alice)

    @property
    def ingress(self) -> str:
        return self.stack.urls["ingress"]

    @property
    def delivery(self) -> str:
        return self.stack.urls["delivery"]

    async def post(self, tenant: str, text: str) -> dict[str, Any]:
        """`POST /v1/messages` with the tenant's key: the accepted message's conversation key and id."""
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                f"{self.ingress}/v1/messages",
                json={"text": text},
                headers={"Authorization": f"Bearer {self.keys[tenant]}"},
            )
        assert r.status_code == 202, r.text
        accepted: dict[str, Any] = r.json()
        return accepted

    async def web_session(self, tenant: str) -> str:
        """A web chat session token for the tenant's alice (chat `alice`), issued by delivery."""
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                f"{self.delivery}/v1/web/sessions", json={}, headers={"Authorization": f"Bearer {self.keys[tenant]}"}
            )
        assert r.status_code == 201, r.text
        body = r.json()
        assert (body["chat_id"], body["tenant_id"]) == (USER, tenant)
        token: str = body["token"]
        return token


@asynccontextmanager
async def tenant_stack(settings_factory: Any, **overrides: Any) -> AsyncIterator[TenantStack]:
    async with FakeOpenAI() as model:
        settings: Settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": model.base_url, "model": "fake-model"}],
            default_connector="fake",
            authz={"default": {"allow_all": True}},
            **overrides,
        )
        async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
            engine = create_engine(stack.settings.database.url)
            try:
                store = KeyStore(session_factory(engine))
                keys = {
                    t: (
                        await store.create(
                            f"{t}-alice", {Scope.MESSAGES_WRITE}, tenant_id=t, platform="web", user_id=USER
                        )
                    ).token
                    for t in TENANTS
                }
            finally:
                await engine.dispose()
            yield TenantStack(stack, model, keys)


class WebPage:
    """A web chat page's event stream (`/v1/web/alice/events`), its frames collected in the background."""

    def __init__(self, delivery: str, token: str) -> None:
        self.delivery, self.token = delivery, token
        self.frames: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> WebPage:
        self._task = asyncio.create_task(self._read())
        await asyncio.wait_for(self.connected.wait(), 30)
        return self

    async def _read(self) -> None:
        async with (
            httpx.AsyncClient(base_url=self.delivery, timeout=None) as http,
            http.stream("GET", f"/v1/web/{USER}/events", params={"token": self.token}) as events,
        ):
            assert events.status_code == 200
            async for line in events.aiter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                if line.startswith("data: "):
                    self.frames.append(json.loads(line.removeprefix("data: ")))
                    self.changed.set()

    async def wait_final(self, containing: str, timeout: float = 60) -> dict[str, Any]:
        """The final frame of the answer that contains `containing` (the fake model echoes the question)."""
        async with asyncio.timeout(timeout):
            while True:
                found = next((f for f in self.frames if f["final"] and containing in f["text"]), None)
                if found is not None:
                    return found
                self.changed.clear()
                await self.changed.wait()

    async def post(self, text: str) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.delivery, timeout=10) as http:
            r = await http.post(
                f"/v1/web/{USER}/messages", json={"text": text}, headers={"Authorization": f"Bearer {self.token}"}
            )
        assert r.status_code == 202, r.text
        accepted: dict[str, Any] = r.json()
        return accepted

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
