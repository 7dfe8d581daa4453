"""ingress's retention on SQLite and PostgreSQL: dedupe rows, pairing codes, revoked keys and the
conversation memory of idle conversations — older rows go, newer ones and disabled tables stay."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.auth import KeyStore, Scope
from agentstream.config import Settings, load_settings
from agentstream.config.ingress import PairingSettings
from agentstream.contracts import InboundMessage, User
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_auth import ApiKey
from agentstream.db.models_ingress import InboundDedupe, IngressConversation, PairingCode
from agentstream.retention import run_purges
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_ingress.pairing_store import PairingStore
from agentstream_ingress.retention import ingress_purges
from agentstream_ingress.store import IngressStore

NOW = datetime.now(UTC)
DAY = timedelta(days=1)

Sessions = async_sessionmaker[AsyncSession]


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[Sessions]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def purge(sessions: Sessions, settings: Settings, dry_run: bool = False) -> dict[str, int]:
    return await run_purges(sessions, ingress_purges(settings, NOW), settings.retention.batch_size, dry_run)


async def backdate(sessions: Sessions, column: Any, where: Any, when: datetime) -> None:
    async with sessions.begin() as s:
        await s.execute(update(column.class_).where(where).values({column.key: when}))


async def test_dedupe_rows_older_than_the_retention_go(sessions: Sessions) -> None:
    store = IngressStore(sessions)
    old, new = ("kafka", "telegram", "1:1"), ("kafka", "telegram", "1:2")
    assert await store.first_sightings([old, new]) == {old, new}
    await store.record_sightings([old, new])  # their output was acked
    await backdate(sessions, InboundDedupe.received_at, InboundDedupe.message_id == "1:1", NOW - 8 * DAY)

    assert "inbound_dedupe" not in await purge(sessions, load_settings(retention={"inbound_dedupe_days": 0}))
    assert (await purge(sessions, load_settings(), dry_run=True))["inbound_dedupe"] == 1
    assert await store.first_sightings([old]) == set()  # a dry run forgets nothing

    assert (await purge(sessions, load_settings()))["inbound_dedupe"] == 1
    assert await store.first_sightings([old, new]) == {old}  # forgotten: it counts as new again


async def test_expired_pairing_codes_go_once_they_no_longer_pace_the_next_code(sessions: Sessions) -> None:
    store = PairingStore(sessions, PairingSettings(code_ttl_s=3600, issue_interval_s=600))
    await store.issue("telegram", "old", "c1", now=NOW - 3 * DAY)  # expired 3 days ago
    await store.issue("telegram", "fresh", "c2", now=NOW)  # still valid
    await store.issue("telegram", "late", "c3", now=NOW - 2 * DAY)  # expired, but its pacing window is long
    await backdate(sessions, PairingCode.issued_at, PairingCode.user_id == "late", NOW - 2 * DAY)

    settings = load_settings(authz={"pairing": {"issue_interval_s": 3 * 86400}})
    assert (await purge(sessions, settings))["pairing_codes"] == 0  # every expired code still paces its user
    assert (await purge(sessions, load_settings()))["pairing_codes"] == 2
    async with sessions() as s:
        assert set(await s.scalars(select(PairingCode.user_id))) == {"fresh"}


async def test_revoked_and_expired_keys_go_only_when_configured(sessions: Sessions) -> None:
    keys = KeyStore(sessions)
    live = await keys.create("live", {Scope.MESSAGES_WRITE})
    revoked_long_ago = await keys.create("old", {Scope.MESSAGES_WRITE})
    revoked_now = await keys.create("recent", {Scope.MESSAGES_WRITE})
    expired_long_ago = await keys.create("expired", {Scope.MESSAGES_WRITE}, expires_at=NOW - 40 * DAY)
    await keys.revoke(revoked_long_ago.key_id)
    await keys.revoke(revoked_now.key_id)
    await backdate(sessions, ApiKey.revoked_at, ApiKey.key_id == revoked_long_ago.key_id, NOW - 40 * DAY)

    assert "api_keys" not in await purge(sessions, load_settings())  # kept by default
    assert (await purge(sessions, load_settings(retention={"revoked_keys_days": 30})))["api_keys"] == 2
    async with sessions() as s:
        assert set(await s.scalars(select(ApiKey.key_id))) == {live.key_id, revoked_now.key_id}
    del expired_long_ago


def message(chat: str) -> InboundMessage:
    return InboundMessage(id=f"m-{chat}", platform="telegram", chat_id=chat, user=User(id="u"), text="hi")


async def test_history_retention_clears_what_ingress_remembers_of_idle_conversations(sessions: Sessions) -> None:
    store = IngressStore(sessions)
    idle, active = message("idle"), message("active")
    await store.remember_starts([(idle, "run-idle"), (active, "run-active")])
    await store.set_role(idle.conversation_key, "fast")
    await backdate(
        sessions, IngressConversation.updated_at, IngressConversation.key == idle.conversation_key, NOW - 40 * DAY
    )

    assert "ingress_conversations" not in await purge(sessions, load_settings())  # history kept by default
    settings = load_settings(retention={"history_days": 30})
    assert (await purge(sessions, settings))["ingress_conversations"] == 1
    assert (await purge(sessions, settings))["ingress_conversations"] == 0  # a cleared row is not cleared again

    idle_facts, active_facts = await store.facts(idle.conversation_key), await store.facts(active.conversation_key)
    assert (idle_facts.unfinished, idle_facts.last_message, idle_facts.role_override) == ((), None, "fast")
    assert (active_facts.unfinished, active_facts.last_message) == (("run-active",), active)


def test_ingress_runs_its_own_purges() -> None:
    svc = bootstrap_ingress(load_settings())
    assert svc.retention.plan is ingress_purges
