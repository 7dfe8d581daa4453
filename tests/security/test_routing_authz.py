"""Routing cannot be steered around authorization: a running ingress (real broker) refuses with 403 a
post whose metadata would route it to a profile the key may not use, or that names an assistant the
key may not use, and nothing of it reaches `inbound` (docs/security.md § Identity comes from the credential)."""

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

PROFILES = {"vip": {"assistant": "vip-bot"}, "support": {"assistant": "support-bot"}}
ROUTES = [{"bot": "premium", "profile": "vip"}, {"platform": "api", "profile": "support"}]

REFUSED = [
    {"id": "named", "profile": "vip", "text": "names the profile"},
    {"id": "steered", "metadata": {"bot": "premium"}, "text": "routes itself to vip"},
    {"id": "assistant", "assistant_id": "vip-bot", "text": "names vip's assistant"},
]


async def test_metadata_cannot_route_a_message_to_a_profile_the_key_may_not_use(settings_factory, topics_created):
    settings = settings_factory(profiles=PROFILES, routes=ROUTES)
    await upgrade(settings.database.url)
    engine = create_engine(settings.database.url)
    try:
        store = KeyStore(session_factory(engine))
        plain = (await store.create("plain", {Scope.MESSAGES_WRITE}, tenant_id="acme")).token
        vip = (await store.create("vip", {Scope.MESSAGES_WRITE}, tenant_id="acme", profiles=("vip",))).token
    finally:
        await engine.dispose()
    svc = bootstrap_ingress(settings)
    async with (
        ServiceHost([svc], "127.0.0.1", {"ingress": free_port()}) as host,
        httpx.AsyncClient(base_url=host.url("ingress"), timeout=10) as client,
    ):

        async def post(key: str, body: dict[str, object]) -> httpx.Response:
            return await client.post("/v1/messages", json=body, headers={"Authorization": f"Bearer {key}"})

        for body in REFUSED:
            r = await post(plain, body)
            assert r.status_code == 403, (body["text"], r.text)
        steered = await post(plain, REFUSED[1])
        assert "'vip'" in steered.json()["detail"]
        # What the key's identity routes to (support, its own assistant) is fine, and so is vip for a key
        # that lists it, by name or by metadata.
        assert (await post(plain, {"id": "own", "text": "mine"})).status_code == 202
        assert (await post(plain, {"id": "own-bot", "assistant_id": "support-bot", "text": "x"})).status_code == 202
        assert (await post(vip, {"id": "vip-meta", "metadata": {"bot": "premium"}, "text": "x"})).status_code == 202
        assert (await post(vip, {"id": "vip-bot", "assistant_id": "vip-bot", "text": "x"})).status_code == 202
        records: list = []  # type: ignore[type-arg]
        for _ in range(50):  # acked posts: read until all four show (Tansu's end offset may lag a fresh write)
            records = await read_to_end(settings.kafka.bootstrap_servers, svc.topics.inbound)
            if len(records) >= 4:
                break
            await asyncio.sleep(0.2)
    produced = [InboundMessage.model_validate_json(r.value or b"") for r in records]
    assert sorted(m.id for m in produced) == ["own", "own-bot", "vip-bot", "vip-meta"]
