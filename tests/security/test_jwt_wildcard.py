"""A JWT claiming every tenant (`"tenant": "*"`) is refused unless it carries the `admin` scope; a
running persistence service (real HTTP, its database) answers it 401 and shows it nothing
(docs/security.md § Credentials)."""

from __future__ import annotations

import time

import httpx
import jwt
import pytest

from agentstream.db import create_engine, session_factory, upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from tests.unit.persistence.test_api_tenants import store_run

SECRET = "hs256-shared-secret-for-the-wildcard-test-0123"
SECRET_ENV = "AGENTSTREAM_TEST_JWT_WILDCARD_SECRET"


def token(tenant: str, scope: str) -> dict[str, str]:
    claims = {"sub": "alice", "tenant": tenant, "scope": scope, "exp": int(time.time()) + 300}
    return {"Authorization": f"Bearer {jwt.encode(claims, SECRET, algorithm='HS256')}"}


async def test_a_wildcard_tenant_claim_needs_the_admin_scope(settings_factory, topics_created, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    settings = settings_factory(auth={"jwt": {"hs256_secret_env": SECRET_ENV}})
    await upgrade(settings.database.url)
    engine = create_engine(settings.database.url)
    try:
        sessions = session_factory(engine)
        await store_run(sessions, "run-acme", "acme/web:alice", "acme", "alice")
        await store_run(sessions, "run-beta", "beta/web:alice", "beta", "alice")
    finally:
        await engine.dispose()
    svc = bootstrap_persistence(settings)
    async with (
        ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}) as host,
        httpx.AsyncClient(base_url=host.url(svc.name), timeout=10) as http,
    ):

        async def runs(headers: dict[str, str]) -> httpx.Response:
            return await http.get("/v1/runs", headers=headers)

        every_tenant = await runs(token("*", "conversations:read"))
        assert every_tenant.status_code == 401, every_tenant.text
        assert "run-acme" not in every_tenant.text and "run-beta" not in every_tenant.text
        assert (await http.get("/v1/runs/run-beta", headers=token("*", "conversations:read"))).status_code == 401

        # A tenant's own token sees its own runs only; the documented admin scope may claim every tenant.
        acme = await runs(token("acme", "conversations:read"))
        assert acme.status_code == 200 and {r["run_id"] for r in acme.json()["items"]} == {"run-acme"}
        operator = await runs(token("*", "admin"))
        assert operator.status_code == 200
        assert {r["run_id"] for r in operator.json()["items"]} == {"run-acme", "run-beta"}


@pytest.mark.parametrize("scope", ["conversations:read", "messages:write gateway", ""])
async def test_no_scope_short_of_admin_makes_a_wildcard_token_valid(scope, monkeypatch, sqlite_url):
    from agentstream.auth import Authenticator
    from agentstream.config import load_settings

    monkeypatch.setenv(SECRET_ENV, SECRET)
    auth = Authenticator(load_settings(auth={"jwt": {"hs256_secret_env": SECRET_ENV}}).auth, sqlite_url)
    bearer = token("*", scope)["Authorization"].removeprefix("Bearer ")
    assert await auth.authenticate(bearer) is None
