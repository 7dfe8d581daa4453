"""API keys: made, verified, cached, revoked and expired; on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agentstream.auth import Authenticator, KeyStore, Scope
from agentstream.auth.keys import hash_secret, parse_key
from agentstream.config import load_settings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_auth import ApiKey


@pytest.fixture
async def store(db_url: str):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield KeyStore(session_factory(engine))
    await engine.dispose()


async def test_key_round_trip_and_only_the_hash_is_stored(store: KeyStore) -> None:
    new = await store.create("bot", {Scope.MESSAGES_WRITE}, tenant_id="acme", platform="web", user_id="alice")
    key_id, secret = parse_key(new.token) or ("", "")
    assert key_id == new.key_id
    async with store.sessions() as session:
        row = await session.get(ApiKey, new.key_id)
    assert row is not None and row.secret_hash == hash_secret(secret) and secret not in row.secret_hash
    principal = await store.verify(new.token)
    assert principal is not None
    assert (principal.tenant_id, principal.platform, principal.user_id) == ("acme", "web", "alice")
    assert principal.has(Scope.MESSAGES_WRITE) and not principal.has(Scope.CONVERSATIONS_READ)
    # a wrong secret with the right id, a truncated key, garbage: all refused
    assert await store.verify(new.token[:-1] + ("A" if new.token[-1] != "A" else "B")) is None
    assert await store.verify(new.token[:-3]) is None
    assert await store.verify("agsk_nothing") is None


async def test_revoked_and_expired_keys_are_refused(store: KeyStore) -> None:
    live = await store.create("a", {Scope.ADMIN})
    gone = await store.create("b", {Scope.ADMIN})
    old = await store.create("c", {Scope.ADMIN}, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert await store.revoke(gone.key_id) is True
    assert await store.revoke(gone.key_id) is False  # already revoked
    assert await store.verify(gone.token) is None
    assert await store.verify(old.token) is None
    assert await store.verify(live.token) is not None
    listed = {k.key_id: k for k in await store.list(include_revoked=True)}
    assert listed[gone.key_id].revoked_at is not None and not listed[old.key_id].active
    assert {k.key_id for k in await store.list()} == {live.key_id, old.key_id}


async def test_pinned_identity_needs_platform_and_user(store: KeyStore) -> None:
    with pytest.raises(ValueError, match="both"):
        await store.create("x", {Scope.MESSAGES_WRITE}, platform="web")


async def test_authenticator_caches_keys_for_key_cache_s(sqlite_url: str) -> None:
    await upgrade(sqlite_url)
    settings = load_settings(auth={"key_cache_s": 60})
    auth = Authenticator(settings.auth, sqlite_url)
    new = await auth.keys().create("k", {Scope.CONVERSATIONS_READ})
    assert (await auth.authenticate(new.token)) == new.principal
    await auth.keys().revoke(new.key_id)
    assert await auth.authenticate(new.token) is not None  # remembered for key_cache_s
    auth.forget()
    assert await auth.authenticate(new.token) is None
    uncached = Authenticator(load_settings(auth={"key_cache_s": 0}).auth, sqlite_url)
    other = await uncached.keys().create("k2", {Scope.ADMIN})
    assert await uncached.authenticate(other.token) is not None
    await uncached.keys().revoke(other.key_id)
    assert await uncached.authenticate(other.token) is None
    await auth.close()
    await uncached.close()


async def test_admin_and_scrape_tokens(monkeypatch: pytest.MonkeyPatch, sqlite_url: str) -> None:
    monkeypatch.setenv("ADM", "admin-secret-value")
    monkeypatch.setenv("SCRAPE", "scrape-secret-value")
    auth = Authenticator(load_settings(auth={"admin_token_env": "ADM", "metrics_token_env": "SCRAPE"}).auth, sqlite_url)
    admin = await auth.authenticate("admin-secret-value")
    scrape = await auth.authenticate("scrape-secret-value")
    assert admin is not None and admin.all_tenants and admin.has(Scope.CONVERSATIONS_READ)
    assert scrape is not None and scrape.has(Scope.METRICS_READ) and not scrape.has(Scope.CONVERSATIONS_READ)
    assert await auth.authenticate("admin-secret-valu") is None
    assert await auth.authenticate("") is None and await auth.authenticate(None) is None
    # unset variables never match an empty or missing token
    bare = Authenticator(load_settings(auth={"admin_token_env": "UNSET_VAR_X"}).auth, sqlite_url)
    assert await bare.authenticate("") is None
