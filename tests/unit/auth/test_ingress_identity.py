"""`POST /v1/messages` through the real ingress app with real API keys (SQLite and PostgreSQL):
who a message is from comes from the key; a body claiming anything else is refused and nothing
is produced; the per-user rate limit counts the key's user, however many user ids a body names."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agentstream.auth import KeyStore, Scope
from agentstream.config import Settings
from agentstream.contracts import InboundMessage
from agentstream.db import create_engine, session_factory, upgrade
from agentstream_ingress.app import IngressService
from agentstream_ingress.bootstrap import bootstrap
from agentstream_ingress.decisions import NoticeDecision, NoticeReason, StartDecision
from agentstream_ingress.pipeline import Pipeline
from agentstream_ingress.store import DatabasePorts
from agentstream_testing.fixtures import make_test_settings

CAPACITY = 5
FLOOD = 300


class RecordingIngress(IngressService):
    """The ingress service with its HTTP app as built, writing to a list instead of Kafka."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.produced: list[InboundMessage] = []
        super().__init__(*args, **kwargs)

    async def produce_inbound(self, msg: InboundMessage) -> None:
        self.produced.append(msg)


@dataclass
class Front:
    svc: RecordingIngress
    client: httpx.AsyncClient
    writer: str  # messages:write, tenant acme, speaks for itself
    writer_user: str
    pinned: str  # messages:write, pinned to web user alice, may choose profile "support"
    gateway: str  # gateway for telegram only, tenant acme
    settings: Settings

    async def post(self, token: str, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post("/v1/messages", json=body, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
async def front(db_url: str) -> AsyncIterator[Front]:
    await upgrade(db_url)
    engine = create_engine(db_url)
    store = KeyStore(session_factory(engine))
    writer = await store.create("writer", {Scope.MESSAGES_WRITE}, tenant_id="acme")
    pinned = await store.create(
        "alice's key", {Scope.MESSAGES_WRITE}, tenant_id="acme", platform="web", user_id="alice", profiles=("support",)
    )
    gateway = await store.create("telegram adapter", {Scope.GATEWAY}, tenant_id="acme", gateway_platforms=("telegram",))
    await engine.dispose()
    settings = make_test_settings(
        "127.0.0.1:1",
        "ident.",
        db_url,
        profiles={"support": {"assistant": "helper"}, "secret": {"assistant": "internal"}},
        authz={"default": {"allow_all": True}, "rate_limit": {"capacity": CAPACITY, "refill_per_s": 1e-6}},
    )
    svc = bootstrap(settings, RecordingIngress)
    transport = httpx.ASGITransport(app=svc.http)
    async with httpx.AsyncClient(transport=transport, base_url="http://ingress") as client:
        yield Front(svc, client, writer.token, f"key.{writer.key_id}", pinned.token, gateway.token, settings)
    await svc.infra.auth.close()


async def test_a_writer_key_posts_as_itself(front: Front) -> None:
    r = await front.post(front.writer, {"text": "hello", "thread_id": "t1"})
    assert r.status_code == 202, r.text
    [msg] = front.svc.produced
    assert (msg.platform, msg.chat_id, msg.thread_id) == ("api", front.writer_user, "t1")
    assert (msg.user.id, msg.user.tenant_id, msg.user.team_id) == (front.writer_user, "acme", None)
    # naming itself is allowed, and changes nothing
    r = await front.post(
        front.writer,
        {
            "text": "again",
            "platform": "api",
            "chat_id": front.writer_user,
            "user": {"id": front.writer_user, "name": "W"},
        },
    )
    assert r.status_code == 202 and front.svc.produced[-1].user.id == front.writer_user


CLAIMS: dict[str, dict[str, Any]] = {
    "another user": {"user": {"id": "ceo"}},
    "another platform": {"platform": "telegram"},
    "a telegram chat": {"platform": "telegram", "chat_id": "555", "user": {"id": "555"}},
    "a team": {"user": {"id": "{own}", "team_id": "T-admins"}},
    "another tenant": {"user": {"id": "{own}", "tenant_id": "globex"}},
    "even its own tenant": {"user": {"id": "{own}", "tenant_id": "acme"}},
    "another chat": {"chat_id": "victim-chat"},
    "a profile not on the key": {"profile": "secret"},
}


async def test_a_writer_key_claiming_another_identity_is_refused(front: Front) -> None:
    for name, claim in CLAIMS.items():
        body = json.loads(json.dumps(claim).replace("{own}", front.writer_user))
        r = await front.post(front.writer, {"text": "spoof", **body})
        assert r.status_code == 403, (name, r.text)
    assert front.svc.produced == []


async def test_a_pinned_key_speaks_for_its_user_and_chooses_only_its_profiles(front: Front) -> None:
    assert (await front.post(front.pinned, {"text": "hi", "profile": "support"})).status_code == 202
    [msg] = front.svc.produced
    assert (msg.platform, msg.chat_id, msg.user.id, msg.user.tenant_id, msg.profile) == (
        "web",
        "alice",
        "alice",
        "acme",
        "support",
    )
    for claim in ({"profile": "secret"}, {"user": {"id": "bob"}}, {"platform": "slack"}, {"chat_id": "bob"}):
        r = await front.post(front.pinned, {"text": "spoof", **claim})
        assert r.status_code == 403, (claim, r.text)
    assert len(front.svc.produced) == 1


async def test_a_gateway_key_speaks_for_users_of_its_platforms_only(front: Front) -> None:
    telegram = {"platform": "telegram", "chat_id": "555", "user": {"id": "555", "tenant_id": "globex"}, "text": "hi"}
    r = await front.post(front.gateway, telegram)
    assert r.status_code == 202, r.text
    [msg] = front.svc.produced
    assert (msg.platform, msg.chat_id, msg.user.id) == ("telegram", "555", "555")
    assert msg.user.tenant_id == "acme"  # the key's tenant, whatever the body says
    slack = {"platform": "slack", "chat_id": "C1", "user": {"id": "U1"}, "text": "hi"}
    for body in (
        slack,
        {"text": "no platform named"},
        {"platform": "telegram", "text": "whose?"},
        {**telegram, "profile": "secret"},
    ):
        r = await front.post(front.gateway, body)
        assert r.status_code == 403, (body, r.text)
    assert len(front.svc.produced) == 1


async def test_fresh_user_ids_do_not_escape_the_per_user_rate_limit(front: Front) -> None:
    for i in range(FLOOD):
        r = await front.post(front.writer, {"id": f"claim-{i}", "text": "x", "user": {"id": f"fresh-{i}"}})
        assert r.status_code == 403
    assert front.svc.produced == []
    # What a key can vary (message id, thread) still leaves every message its own user's.
    for i in range(FLOOD):
        r = await front.post(front.writer, {"id": f"m-{i}", "text": "x", "thread_id": f"thread-{i}"})
        assert r.status_code == 202, r.text
    produced = front.svc.produced
    assert len(produced) == FLOOD and {(m.platform, m.user.id) for m in produced} == {("api", front.writer_user)}
    # ... and the pipeline's rate limiter, which counts (platform, user), lets `capacity` of them run.
    engine = create_engine(front.settings.database.url)
    try:
        pipeline = Pipeline(front.settings, DatabasePorts(session_factory(engine), front.settings.authz.pairing))
        decisions = await pipeline.decide_batch([m.model_dump_json().encode() for m in produced])
        await pipeline.settle()
    finally:
        await engine.dispose()
    started = [d for d in decisions if isinstance(d, StartDecision)]
    limited = [d for d in decisions if isinstance(d, NoticeDecision) and d.reason is NoticeReason.RATE_LIMITED]
    assert (len(started), len(limited)) == (CAPACITY, FLOOD - CAPACITY)
