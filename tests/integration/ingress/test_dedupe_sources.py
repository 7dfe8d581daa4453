"""Dedupe is per source: an id claimed first through the API (here by an admin credential, which
may speak for telegram users) does not suppress the real
webhook message with that id (on SQLite and PostgreSQL)."""

from __future__ import annotations

import httpx

from agentstream.contracts import RunCommandAdapter, StartRun
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import read_until
from tests.integration.ingress.test_decisions_broker import settled

TG_SECRET = {"X-Telegram-Bot-Api-Secret-Token": "tg-secret"}
UPDATE = {
    "update_id": 9,
    "message": {
        "message_id": 9,
        "from": {"id": 42, "is_bot": False},
        "chat": {"id": 42, "type": "private"},
        "text": "the real one",
    },
}
SQUAT = {
    "id": "42:9",
    "platform": "telegram",
    "chat_id": "42",
    "user": {"id": "42"},
    "text": "squatted",
    "source": "webhook:telegram:main",
}  # claiming the webhook's source changes nothing


async def test_an_id_squatted_through_the_api_leaves_the_webhook_message_answered(
    settings_factory, topics_created, monkeypatch, db_url
):
    monkeypatch.setenv("T_TG_SECRET", "tg-secret")
    settings = settings_factory(
        db_url=db_url, ingress={"webhooks": {"telegram": {"main": {"secret_env": "T_TG_SECRET"}}}}
    )
    svc = bootstrap_ingress(settings)
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    async with host, httpx.AsyncClient(base_url=host.url("ingress"), timeout=10) as client:
        for _ in range(2):  # the API post first, each twice: one run per source
            assert (await client.post("/v1/messages", json=SQUAT, headers=ADMIN_HEADERS)).status_code == 202
        for _ in range(2):
            r = await client.post("/webhooks/telegram/main", json=UPDATE, headers=TG_SECRET)
            assert r.status_code == 202 and r.json()["message_id"] == "42:9"
        runs = await read_until(settings.kafka.bootstrap_servers, svc.topics.runs, settled(lambda rs: len(rs) >= 2))

    starts = [c for c in (RunCommandAdapter.validate_json(r.value) for r in runs) if isinstance(c, StartRun)]
    assert sorted(s.text for s in starts) == ["squatted", "the real one"]
    real = next(s for s in starts if s.text == "the real one")
    assert real.inbound_id == "42:9" and real.reply_target.platform == "telegram" and real.reply_target.chat_id == "42"
