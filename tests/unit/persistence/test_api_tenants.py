"""The read API answers each credential with its own tenant's data only: another tenant's is 404 / empty."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.auth import Authenticator, KeyStore, Scope
from agentstream.config import load_settings
from agentstream.contracts import ChatMessage, MessageCompleted, ReplyTarget, RunFinished, RunStarted
from agentstream.db import create_engine, session_factory, upgrade
from agentstream_persistence.api import add_routes
from agentstream_persistence.buffers import BufferSet
from agentstream_persistence.rows import rows_for
from agentstream_persistence.run_writes import write_run
from agentstream_testing.fixtures import authed_app

T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def store_run(
    sessions: async_sessionmaker[AsyncSession], root: str, key: str, tenant: str | None, user: str, failed: bool = False
) -> None:
    def ids(seq: int) -> dict[str, object]:
        return {
            "run_id": root,
            "root_run_id": root,
            "conversation_key": key,
            "seq": seq,
            "ts": T0 + timedelta(seconds=seq),
        }

    buffers = BufferSet()
    for ev in (
        RunStarted(
            **ids(1),
            assistant_id="default",
            connector_id="demo",
            user_id=user,
            tenant_id=tenant,
            reply_target=ReplyTarget(platform="web", chat_id=key.split(":")[1]),
            input=[ChatMessage(role="user", content=f"question of {user}")],
        ),
        MessageCompleted(**ids(2), message_id="m", text=f"answer for {user}"),
        RunFinished(
            **ids(3),
            status="failed" if failed else "completed",
            text=f"answer for {user}",
            reason="error" if failed else None,
        ),
    ):
        buffers.add(ev)
    buf = buffers.get(root)
    assert buf is not None
    await write_run(sessions, rows_for(buf))


@pytest.fixture
async def api(db_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, KeyStore]]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    sessions = session_factory(engine)
    await store_run(sessions, "ra", "web:alice", "acme", "alice", failed=True)
    await store_run(sessions, "rb", "web:bob", "acme", "bob")
    await store_run(sessions, "rz", "web:zed", "zeta", "zed", failed=True)
    await store_run(sessions, "rn", "web:nobody", None, "nobody")  # no tenant: the default tenant's
    app = authed_app()
    app.state.auth = Authenticator(load_settings(auth={"key_cache_s": 0}).auth, db_url, sessions)
    add_routes(app, sessions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        yield client, KeyStore(sessions)
    await engine.dispose()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_each_tenant_sees_only_its_own(api: tuple[httpx.AsyncClient, KeyStore]) -> None:
    http, keys = api
    acme = bearer((await keys.create("acme", {Scope.CONVERSATIONS_READ, Scope.RUNS_RESUME}, tenant_id="acme")).token)
    zeta = bearer((await keys.create("zeta", {Scope.CONVERSATIONS_READ}, tenant_id="zeta")).token)
    default = bearer((await keys.create("d", {Scope.CONVERSATIONS_READ})).token)
    ops = bearer((await keys.create("ops", {Scope.ADMIN}, tenant_id="*")).token)

    assert (await http.get("/v1/runs/ra", headers=acme)).json()["tenant_id"] == "acme"
    assert (await http.get("/v1/runs/ra", headers=zeta)).status_code == 404
    assert (await http.get("/v1/runs/rn", headers=default)).status_code == 200
    assert (await http.get("/v1/runs/rn", headers=acme)).status_code == 404
    assert (await http.get("/v1/conversations/web:alice/messages", headers=zeta)).json()["items"] == []
    assert len((await http.get("/v1/conversations/web:alice/messages", headers=acme)).json()["items"]) == 2
    assert (await http.get("/v1/conversations/web:zed/runs", headers=acme)).json()["items"] == []
    assert {r["run_id"] for r in (await http.get("/v1/runs", headers=acme)).json()["items"]} == {"ra", "rb"}
    assert {r["run_id"] for r in (await http.get("/v1/runs", headers=ops)).json()["items"]} == {"ra", "rb", "rz", "rn"}
    assert (await http.get("/v1/runs/ra/resume-steps", headers=acme)).status_code == 200
    # another tenant's checkpoint is as absent as a missing one; a reader without runs:resume is refused
    assert (await http.get("/v1/runs/rz/resume-steps", headers=acme)).status_code == 404
    assert (await http.get("/v1/runs/rz/resume-steps", headers=zeta)).status_code == 403


async def test_a_key_pinned_to_a_user_sees_only_that_users_runs(api: tuple[httpx.AsyncClient, KeyStore]) -> None:
    http, keys = api
    alice = bearer(
        (
            await keys.create("alice", {Scope.CONVERSATIONS_READ}, tenant_id="acme", platform="web", user_id="alice")
        ).token
    )
    assert (await http.get("/v1/runs/ra", headers=alice)).status_code == 200
    assert (await http.get("/v1/runs/rb", headers=alice)).status_code == 404
    assert (await http.get("/v1/conversations/web:bob/messages", headers=alice)).json()["items"] == []
    assert [r["run_id"] for r in (await http.get("/v1/runs", headers=alice)).json()["items"]] == ["ra"]


async def test_anonymous_and_wrong_scope(api: tuple[httpx.AsyncClient, KeyStore]) -> None:
    http, keys = api
    writer = bearer((await keys.create("w", {Scope.MESSAGES_WRITE}, tenant_id="acme")).token)
    for path in (
        "/v1/runs",
        "/v1/runs/ra",
        "/v1/conversations/web:alice/messages",
        "/v1/conversations/web:alice/runs",
        "/v1/runs/ra/resume-steps",
    ):
        assert (await http.get(path)).status_code == 401, path
        assert (await http.get(path, headers=bearer("agsk_000000000000_" + "x" * 43))).status_code == 401, path
        assert (await http.get(path, headers=writer)).status_code == 403, path
