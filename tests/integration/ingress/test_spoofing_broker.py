"""A running ingress on the real broker: a body claiming another identity than its key allows is
refused with 403, and nothing of it reaches `inbound` (read to its end)."""

from __future__ import annotations

import asyncio

import httpx

from agentstream.auth import KeyStore, Scope
from agentstream.contracts import InboundMessage
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_testing.kafka import read_to_end

SPOOFS = [
    {"id": "s1", "platform": "telegram", "chat_id": "555", "user": {"id": "555"}, "text": "spoof: post into 555"},
    {"id": "s2", "user": {"id": "ceo"}, "text": "spoof: as the ceo"},
    {"id": "s3", "chat_id": "victim", "text": "spoof: into another chat"},
    {"id": "s4", "user": {"id": "{own}", "team_id": "T-admins"}, "text": "spoof: an allowlisted team"},
    {"id": "s5", "user": {"id": "{own}", "tenant_id": "globex"}, "text": "spoof: another tenant"},
    {"id": "s6", "profile": "p-open", "text": "spoof: a profile not on the key"},
]


async def test_spoofed_bodies_are_refused_and_never_reach_kafka(settings_factory, topics_created):
    settings = settings_factory(profiles={"p-open": {"assistant": "a", "authz": {"allow_all": True}}})
    await upgrade(settings.database.url)
    engine = create_engine(settings.database.url)
    try:
        key = await KeyStore(session_factory(engine)).create("writer", {Scope.MESSAGES_WRITE}, tenant_id="acme")
    finally:
        await engine.dispose()
    own = f"key.{key.key_id}"
    svc = bootstrap_ingress(settings)
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    headers = {"Authorization": f"Bearer {key.token}"}
    async with host, httpx.AsyncClient(base_url=host.url("ingress"), headers=headers, timeout=10) as client:
        assert (await client.post("/v1/messages", json={"id": "before", "text": "mine"})).status_code == 202
        for spoof in SPOOFS:
            body = (
                {**spoof, "user": {**spoof["user"], "id": own}} if spoof.get("user", {}).get("id") == "{own}" else spoof
            )
            r = await client.post("/v1/messages", json=body)
            assert r.status_code == 403, (spoof["text"], r.text)
        anonymous = await client.post(
            "/v1/messages", json={"id": "anon", "text": "spoof: no key"}, headers={"Authorization": ""}
        )
        assert anonymous.status_code == 401
        assert (await client.post("/v1/messages", json={"id": "after", "text": "mine too"})).status_code == 202
        # Both real posts were acked (202); a fresh reader may still see an end offset from before them
        # (Tansu's ListOffsets lags a just-written batch), so read until they show, then once more.
        records = []
        for _ in range(50):
            records = await read_to_end(settings.kafka.bootstrap_servers, svc.topics.inbound)
            if len(records) >= 2:
                break
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # anything spoofed would have been written before "after"
        again = await read_to_end(settings.kafka.bootstrap_servers, svc.topics.inbound)
        records = again if len(again) >= len(records) else records
    produced = [InboundMessage.model_validate_json(r.value or b"") for r in records]
    assert [m.id for m in produced] == ["before", "after"]
    assert {(m.platform, m.chat_id, m.user.id, m.user.tenant_id) for m in produced} == {("api", own, own, "acme")}
