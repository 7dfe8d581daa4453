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
from agentstream_ingress import http
from agentstream_ingress.openapi import render
from agentstream_ingress.webhooks import slack
from agentstream_testing.fixtures import ADMIN_HEADERS, ADMIN_TOKEN_ENV

ROOT = Path(__file__).resolve().parents[3]
BODY = {"id": "m-1", "platform": "web", "chat_id": "c1", "user": {"id": "u"}, "text": "hi"}
UPDATE = {
    "update_id": 1,
    "message": {
        "message_id": 3,
        "from": {"id": 5, "is_bot": False},
        "chat": {"id": 5, "type": "private"},
        "text": "hello",
    },
}


@pytest.fixture
def front(monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TG_SECRET", "tg-secret")
    monkeypatch.setenv("SLACK_SECRET", "slack-secret")
    settings = load_settings(
        auth={"admin_token_env": ADMIN_TOKEN_ENV},
        ingress={
            "max_body_bytes": 2048,
            "publish_timeout_s": 0.2,
            "webhooks": {
                "telegram": {"main": {"secret_env": "TG_SECRET"}},
                "slack": {"signing_secret_env": "SLACK_SECRET"},
            },
        },
    )
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


@pytest.mark.parametrize(
    "body",
    [
        {**BODY, "chat_id": {"secret": "MARKER-1"}},
        {**BODY, "user": {"id": "MARKER-1\u0000"}},
        {**BODY, "text": ["MARKER-1"]},
        {**BODY, "platform": "MARKER-1" * 20},
    ],
)
def test_422_names_the_field_but_never_echoes_the_input(front, body):
    client, produced, _ = front
    r = client.post("/v1/messages", json=body)
    assert r.status_code == 422 and produced == []
    assert "MARKER-1" not in r.text
    assert all(set(e) == {"loc", "msg"} and e["loc"][0] == "body" for e in r.json()["detail"])


def test_422_for_a_body_that_is_not_json_does_not_echo_it(front):
    client, produced, _ = front
    r = client.post("/v1/messages", content=b'{"MARKER-2": ', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "MARKER-2" not in r.text and produced == []


def test_a_posted_message_cannot_choose_its_source(front):
    client, produced, _ = front
    r = client.post("/v1/messages", json={**BODY, "source": "webhook:telegram:main"})
    assert r.status_code == 202 and [m.source for m in produced] == ["api:admin-token"]  # the credential's


def test_a_credential_whose_user_id_breaks_the_contract_is_422_not_500(front):
    from agentstream.auth import Principal, Scope, authenticate
    from agentstream.auth.principal import CredentialKind

    client, produced, _ = front
    pinned = Principal(
        subject="k1", kind=CredentialKind.API_KEY, scopes=frozenset({Scope.MESSAGES_WRITE}), user_id="u" * 201
    )  # a valid user id, one too long for the direct chat's id
    client.app.dependency_overrides[authenticate] = lambda: pinned
    r = client.post("/v1/messages", json={"text": "hi"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "chat_id"] and produced == []


def test_body_size_limit(front):
    client, produced, _ = front
    r = client.post("/v1/messages", json={**BODY, "text": "x" * 5000})
    assert r.status_code == 413 and produced == []


def test_slow_kafka_is_a_clear_503_not_a_hang(front):
    client, produced, delay = front
    delay["s"] = 5.0
    r = client.post("/v1/messages", json=BODY)
    # Answered when the 0.2 s publish timeout ran out: a hang would have published after 5 s and said 202.
    assert r.status_code == 503 and "kafka" in r.json()["detail"] and produced == []


def test_telegram_secret_checked(front):
    client, produced, _ = front
    assert client.post("/webhooks/telegram/main", json=UPDATE).status_code == 401
    bad = client.post("/webhooks/telegram/main", json=UPDATE, headers={"X-Telegram-Bot-Api-Secret-Token": "no"})
    assert bad.status_code == 401
    assert (
        client.post(
            "/webhooks/telegram/other", json=UPDATE, headers={"X-Telegram-Bot-Api-Secret-Token": "tg-secret"}
        ).status_code
        == 404
    )
    assert produced == []
    ok = client.post("/webhooks/telegram/main", json=UPDATE, headers={"X-Telegram-Bot-Api-Secret-Token": "tg-secret"})
    assert ok.status_code == 202 and ok.json()["message_id"] == "5:3"
    assert produced[0].metadata["bot"] == "main"


TG_SECRET = {"X-Telegram-Bot-Api-Secret-Token": "tg-secret"}
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.mark.parametrize("body", [b'{"MARKER-3": ', b"\xff\xfeMARKER-3", b'["MARKER-3"]', b""])
def test_telegram_secret_is_checked_before_the_body_is_read(front, body):
    client, produced, _ = front
    for headers in ({}, {"X-Telegram-Bot-Api-Secret-Token": "MARKER-3"}):
        r = client.post("/webhooks/telegram/main", content=body, headers={**JSON_TYPE, **headers})
        assert r.status_code == 401 and r.json() == {"detail": "bad or missing secret token"}
    r = client.post("/webhooks/telegram/main", content=body, headers={**JSON_TYPE, **TG_SECRET})
    assert r.status_code == 400 and r.json() == {"detail": "body is not a JSON object"}
    assert produced == []


def test_unknown_telegram_bot_is_404_without_echo(front):
    client, _, _ = front
    r = client.post("/webhooks/telegram/MARKER-4", json=UPDATE, headers=TG_SECRET)
    assert r.status_code == 404 and "MARKER-4" not in r.text


@pytest.mark.parametrize("where", ["chat", "from", "message_id", "message_thread_id", "reply"])
@pytest.mark.parametrize("bad", [{"a": "MARKER-5"}, ["MARKER-5"], True, 1.5, "MARKER-5\n", "x" * 300])
def test_telegram_ids_must_be_scalars(front, where, bad):
    client, produced, _ = front
    message = json.loads(json.dumps(UPDATE["message"]))
    if where in ("chat", "from"):
        message[where]["id"] = bad
    elif where == "reply":
        message["reply_to_message"] = {"message_id": bad}
    else:
        message[where] = bad
    r = client.post("/webhooks/telegram/main", json={"update_id": 7, "message": message}, headers=TG_SECRET)
    assert r.status_code == 400 and r.json() == {"detail": "invalid update"} and produced == []


def test_telegram_webhook_message_carries_its_source(front):
    client, produced, _ = front
    assert client.post("/webhooks/telegram/main", json=UPDATE, headers=TG_SECRET).status_code == 202
    assert [m.source for m in produced] == ["webhook:telegram:main"]


def _slack(client, payload, ts=None, secret="slack-secret"):  # type: ignore[no-untyped-def]
    body = json.dumps(payload).encode()
    ts = ts or str(int(time.time()))
    headers = {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": slack.sign(secret, ts, body),
        "Content-Type": "application/json",
    }
    return client.post("/webhooks/slack", content=body, headers=headers)


def test_slack_signature_timestamp_challenge_and_bots(front):
    client, produced, _ = front
    assert _slack(client, {"type": "url_verification", "challenge": "abc"}).json() == {"challenge": "abc"}
    event = {
        "type": "event_callback",
        "event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.1"},
    }
    assert _slack(client, event, secret="wrong").status_code == 401
    assert _slack(client, event, ts=str(int(time.time()) - 301)).status_code == 401
    assert client.post("/webhooks/slack", json=event).status_code == 401
    bot = {**event, "event": {**event["event"], "bot_id": "B1"}}
    assert _slack(client, bot).json()["ignored"] is True
    assert produced == []
    r = _slack(client, event)
    assert r.status_code == 202 and [m.id for m in produced] == ["C1:1.1"]


@pytest.mark.parametrize("ts", ["9" * 400, "-5", "abc", " 12", "1_000", "+12", "1.5", "9" * 13])
def test_slack_timestamp_that_is_not_unix_seconds_is_401(front, ts):
    client, produced, _ = front
    event = {
        "type": "event_callback",
        "event": {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1.1"},
    }
    r = _slack(client, event, ts=ts)  # correctly signed over that timestamp: only the timestamp is wrong
    assert r.status_code == 401 and r.json()["detail"].startswith("signature check failed") and produced == []


@pytest.mark.parametrize("field", ["channel", "user", "ts", "thread_ts", "team"])
def test_slack_ids_must_be_scalars(front, field):
    client, produced, _ = front
    event = {
        "type": "event_callback",
        "event": {
            "type": "message",
            "channel": "C1",
            "user": "U1",
            "text": "hi",
            "ts": "1.1",
            field: {"a": "MARKER-6"},
        },
    }
    r = _slack(client, event)
    assert r.status_code == 400 and r.json() == {"detail": "invalid update"} and produced == []
    ok = _slack(client, {**event, "event": {**event["event"], field: "1.0"}})
    assert ok.status_code == 202 and produced[0].source == "webhook:slack"


def test_openapi_document_in_docs_is_current():
    checked_in = (ROOT / "docs" / "openapi-ingress.json").read_text(encoding="utf-8")
    assert checked_in == render(), "run: uv run python -m agentstream_ingress.openapi docs/openapi-ingress.json"
