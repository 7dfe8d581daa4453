"""The HTTP front door without Kafka: validation, size limit, webhook checks, 503 when Kafka is slow."""

import asyncio
import json
import time
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from agentstream.auth import Authenticator
from agentstream.config import load_settings
from agentstream.contracts import InboundMessage
from agentstream.testing.fixtures import ADMIN_HEADERS, ADMIN_TOKEN_ENV
from agentstream_ingress import http
from agentstream_ingress.openapi import render
from agentstream_ingress.webhooks import slack

ROOT = Path(__file__).resolve().parents[3]
BODY = {"id": "m-1", "platform": "web", "chat_id": "c1", "user": {"id": "u"}, "text": "hi"}
UPDATE = {"update_id": 1, "message": {"message_id": 3, "from": {"id": 5, "is_bot": False},
                                      "chat": {"id": 5, "type": "private"}, "text": "hello"}}


@pytest.fixture
def front(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TG_SECRET", "tg-secret")
    monkeypatch.setenv("SLACK_SECRET", "slack-secret")
    settings = load_settings(auth={"admin_token_env": ADMIN_TOKEN_ENV}, ingress={
        "max_body_bytes": 2048, "publish_timeout_s": 0.2,
        "webhooks": {"telegram": {"main": {"secret_env": "TG_SECRET"}},
                     "slack": {"signing_secret_env": "SLACK_SECRET"}}})
    produced: list[InboundMessage] = []
    delay = {"s": 0.0}

    async def produce(msg: InboundMessage) -> None:
        await asyncio.sleep(delay["s"])
        produced.append(msg)

    app = FastAPI()
    app.state.auth = Authenticator(settings.auth, "sqlite+aiosqlite:///:memory:")
    http.register(app, settings, produce)
    return TestClient(app, headers=ADMIN_HEADERS), produced, delay


def test_post_message_accepted(front):
    client, produced, _ = front
    r = client.post("/v1/messages", json={**BODY, "thread_id": "t"})
    assert r.status_code == 202 and r.json() == {"conversation_key": "web:c1:t", "message_id": "m-1"}
    assert [m.id for m in produced] == ["m-1"]


def test_invalid_body_is_422_with_field_errors(front):
    client, produced, _ = front
    r = client.post("/v1/messages", json={**BODY, "user": 5, "text": None})
    assert r.status_code == 422
    locs = {tuple(e["loc"]) for e in r.json()["detail"]}
    assert ("body", "user") in locs and ("body", "text") in locs
    assert produced == []


def test_body_size_limit(front):
    client, produced, _ = front
    r = client.post("/v1/messages", json={**BODY, "text": "x" * 5000})
    assert r.status_code == 413 and produced == []


def test_slow_kafka_is_a_clear_503_not_a_hang(front):
    client, produced, delay = front
    delay["s"] = 5.0
    started = time.monotonic()
    r = client.post("/v1/messages", json=BODY)
    assert r.status_code == 503 and "kafka" in r.json()["detail"]
    assert time.monotonic() - started < 2.0


def test_telegram_secret_checked(front):
    client, produced, _ = front
    assert client.post("/webhooks/telegram/main", json=UPDATE).status_code == 401
    bad = client.post("/webhooks/telegram/main", json=UPDATE, headers={"X-Telegram-Bot-Api-Secret-Token": "no"})
    assert bad.status_code == 401
    assert client.post("/webhooks/telegram/other", json=UPDATE,
                       headers={"X-Telegram-Bot-Api-Secret-Token": "tg-secret"}).status_code == 404
    assert produced == []
    ok = client.post("/webhooks/telegram/main", json=UPDATE, headers={"X-Telegram-Bot-Api-Secret-Token": "tg-secret"})
    assert ok.status_code == 202 and ok.json()["message_id"] == "5:3"
    assert produced[0].metadata["bot"] == "main"


def _slack(client, payload, ts=None, secret="slack-secret"):  # type: ignore[no-untyped-def]
    body = json.dumps(payload).encode()
    ts = ts or str(int(time.time()))
    headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": slack.sign(secret, ts, body),
               "Content-Type": "application/json"}
    return client.post("/webhooks/slack", content=body, headers=headers)


def test_slack_signature_timestamp_challenge_and_bots(front):
    client, produced, _ = front
    assert _slack(client, {"type": "url_verification", "challenge": "abc"}).json() == {"challenge": "abc"}
    event = {"type": "event_callback", "event": {"type": "message", "channel": "C1", "user": "U1",
                                                  "text": "hi", "ts": "1.1"}}
    assert _slack(client, event, secret="wrong").status_code == 401
    assert _slack(client, event, ts=str(int(time.time()) - 301)).status_code == 401
    assert client.post("/webhooks/slack", json=event).status_code == 401
    bot = {**event, "event": {**event["event"], "bot_id": "B1"}}
    assert _slack(client, bot).json()["ignored"] is True
    assert produced == []
    r = _slack(client, event)
    assert r.status_code == 202 and [m.id for m in produced] == ["C1:1.1"]


def test_openapi_document_in_docs_is_current():
    checked_in = (ROOT / "docs" / "openapi-ingress.json").read_text(encoding="utf-8")
    assert checked_in == render(), "run: uv run python -m agentstream_ingress.openapi docs/openapi-ingress.json"
