"""The web adapter's HTTP routes without a browser: the public page, session tokens, and the forwarder.

Delivery's routes and a stand-in ingress are real HTTP servers on 127.0.0.1 (an SSE stream
never ends, so it is read over a socket, not through an in-process transport).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agentstream.auth import Authenticator, KeyStore, Scope, WebSessions
from agentstream.config.auth import AuthSettings, WebSessionSettings
from agentstream.contracts import ReplyTarget
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.kafka import free_port
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.adapters.web_history import ConversationHistory
from agentstream_delivery.adapters.web_http import add_web_routes
from agentstream_testing.fixtures import ADMIN_HEADERS, ADMIN_TOKEN_ENV

GATEWAY_ENV = "AGENTSTREAM_TEST_WEB_GATEWAY_KEY"
GATEWAY_KEY = "agsk_000000000000_stand-in-gateway-key-for-delivery-to-use-000"
SECRET = "s" * 40
HISTORY_ENV = "AGENTSTREAM_TEST_WEB_HISTORY_KEY"
HISTORY_KEY = "agsk_000000000000_stand-in-history-key-for-delivery-to-use-000"


@asynccontextmanager
async def serve(app: FastAPI) -> AsyncIterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, no event
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass
class StandInIngress:
    """Records what delivery forwards; answers `status`."""

    status: int = 202
    received: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/messages")
        async def post(request: Request) -> JSONResponse:
            self.received.append((request.headers.get("authorization"), await request.json()))
            return JSONResponse({"detail": "stand-in"}, status_code=self.status)

        return app


@dataclass
class Delivery:
    url: str
    sessions: WebSessions
    adapter: WebAdapter
    keys: KeyStore


@asynccontextmanager
async def delivery(
    sqlite_url: str,
    ingress_url: str,
    api_key_env: str | None = GATEWAY_ENV,
    ttl_s: float = 3600,
    persistence_url: str = "http://127.0.0.1:1",
) -> AsyncIterator[Delivery]:
    await upgrade(sqlite_url)
    engine = create_engine(sqlite_url)
    app = FastAPI()
    app.state.auth = Authenticator(AuthSettings(admin_token_env=ADMIN_TOKEN_ENV), sqlite_url, session_factory(engine))
    sessions = WebSessions(WebSessionSettings(ttl_s=ttl_s), secret=SECRET)
    adapter = WebAdapter()
    history = ConversationHistory(persistence_url, HISTORY_ENV, timeout_s=2)
    add_web_routes(app, adapter, sessions, ingress_url, api_key_env, history, timeout_s=2)
    try:
        async with serve(app) as url:
            yield Delivery(url, sessions, adapter, KeyStore(session_factory(engine)))
            await adapter.close()
    finally:
        await engine.dispose()


@pytest.fixture
def gateway_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(GATEWAY_ENV, GATEWAY_KEY)
    return GATEWAY_KEY


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def first_chunk(http: httpx.AsyncClient, url: str, **kwargs: Any) -> tuple[int, str, str]:
    async with http.stream("GET", url, **kwargs) as resp:
        if resp.status_code != 200:
            await resp.aread()
            return resp.status_code, resp.headers.get("content-type", ""), resp.text
        async for chunk in resp.aiter_text():
            return resp.status_code, resp.headers["content-type"], chunk
    raise AssertionError("stream ended without a chunk")


async def test_page_and_static_files_are_public(sqlite_url: str) -> None:
    async with delivery(sqlite_url, "http://127.0.0.1:1") as d, httpx.AsyncClient(base_url=d.url) as http:
        page = await http.get("/web/chat-1")
        js = await http.get("/web/static/chat.js")
        other = await http.get("/web/static/secrets.txt")
        icon, static_icon = await http.get("/favicon.ico"), await http.get("/web/static/favicon.svg")
    assert page.status_code == 200 and 'src="static/chat.js"' in page.text
    assert 'rel="icon" href="static/favicon.svg"' in page.text
    assert icon.status_code == static_icon.status_code == 200 and icon.content == static_icon.content
    assert icon.headers["content-type"] == "image/svg+xml" and icon.text.startswith("<svg")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert "EventSource" in js.text and "sessionStorage" in js.text and "user_id" not in js.text
    assert other.status_code == 404


async def test_gateway_credential_names_chat_and_user(sqlite_url: str) -> None:
    async with delivery(sqlite_url, "http://127.0.0.1:1") as d, httpx.AsyncClient(base_url=d.url) as http:
        anonymous = await http.post("/v1/web/sessions", json={"user_id": "alice"})
        issued = await http.post(
            "/v1/web/sessions",
            headers=ADMIN_HEADERS,
            json={"chat_id": "room 1", "user_id": "alice", "user_name": "Alice", "tenant_id": "acme"},
        )
        nameless = await http.post("/v1/web/sessions", headers=ADMIN_HEADERS, json={})
        long_user = await http.post("/v1/web/sessions", headers=ADMIN_HEADERS, json={"user_id": "u" * 250})
        control = await http.post(
            "/v1/web/sessions", headers=ADMIN_HEADERS, json={"user_id": "a", "chat_id": "c\u0007"}
        )
        gateway = await d.keys.create("site", {Scope.GATEWAY}, tenant_id="acme", gateway_platforms=("web",))
        own_tenant = await http.post("/v1/web/sessions", headers=bearer(gateway.token), json={"user_id": "bob"})
        other_tenant = await http.post(
            "/v1/web/sessions", headers=bearer(gateway.token), json={"user_id": "bob", "tenant_id": "globex"}
        )
    assert anonymous.status_code == 401
    assert issued.status_code == 201, issued.text
    body = issued.json()
    assert (body["chat_id"], body["user_id"], body["tenant_id"]) == ("room 1", "alice", "acme")
    assert body["url"] == f"/web/room%201#token={body['token']}"
    session = d.sessions.verify(body["token"])
    assert session is not None and (session.chat_id, session.user_id, session.name) == ("room 1", "alice", "Alice")
    assert nameless.status_code == 422 and long_user.status_code == 422 and control.status_code == 422
    assert "name chat_id" in long_user.json()["detail"]
    assert own_tenant.status_code == 201 and own_tenant.json()["chat_id"] == "bob"
    assert own_tenant.json()["tenant_id"] == "acme"
    assert other_tenant.status_code == 403


async def test_a_messages_write_key_gets_a_session_for_itself_only(sqlite_url: str) -> None:
    async with delivery(sqlite_url, "http://127.0.0.1:1") as d, httpx.AsyncClient(base_url=d.url) as http:
        own = await d.keys.create("me", {Scope.MESSAGES_WRITE}, tenant_id="acme")
        pinned = await d.keys.create("web-user", {Scope.MESSAGES_WRITE}, platform="web", user_id="carol")
        telegram = await d.keys.create("tg-user", {Scope.MESSAGES_WRITE}, platform="telegram", user_id="555")
        reader = await d.keys.create("reader", {Scope.CONVERSATIONS_READ})
        mine = await http.post("/v1/web/sessions", headers=bearer(own.token), json={})
        carol = await http.post("/v1/web/sessions", headers=bearer(pinned.token), json={"user_name": "C"})
        other_user = await http.post("/v1/web/sessions", headers=bearer(own.token), json={"user_id": "alice"})
        other_chat = await http.post("/v1/web/sessions", headers=bearer(own.token), json={"chat_id": "room"})
        not_web = await http.post("/v1/web/sessions", headers=bearer(telegram.token), json={})
        no_scope = await http.post("/v1/web/sessions", headers=bearer(reader.token), json={})
    assert mine.status_code == 201
    user = f"key.{own.key_id}"
    assert (mine.json()["chat_id"], mine.json()["user_id"], mine.json()["tenant_id"]) == (user, user, "acme")
    assert carol.status_code == 201 and carol.json()["chat_id"] == "carol"
    assert [r.status_code for r in (other_user, other_chat, not_web, no_scope)] == [403, 403, 403, 403]


async def test_the_stream_needs_a_valid_token_of_that_chat(sqlite_url: str) -> None:
    async with delivery(sqlite_url, "http://127.0.0.1:1") as d, httpx.AsyncClient(base_url=d.url) as http:
        token, _ = d.sessions.issue("chat-1", "alice", "default")
        other, _ = d.sessions.issue("chat-2", "alice", "default")
        expired, _ = d.sessions.issue("chat-1", "alice", "default", now=time.time() - 7200)
        foreign, _ = WebSessions(WebSessionSettings(), secret="x" * 40).issue("chat-1", "alice", "default")
        events = "/v1/web/chat-1/events"
        none = await first_chunk(http, events)
        wrong = await first_chunk(http, events, params={"token": "not-a-token"})
        stale = await first_chunk(http, events, params={"token": expired})
        forged = await first_chunk(http, events, params={"token": foreign})
        elsewhere = await first_chunk(http, events, params={"token": other})
        by_query = await first_chunk(http, events, params={"token": token})
        by_header = await first_chunk(http, events, headers=bearer(token))
    assert [r[0] for r in (none, wrong, stale, forged)] == [401, 401, 401, 401]
    assert elsewhere[0] == 403 and "another chat" in elsewhere[2]
    for status, content_type, chunk in (by_query, by_header):
        assert status == 200 and content_type.startswith("text/event-stream") and chunk.startswith(": connected")


async def test_posts_carry_the_sessions_identity_and_deliverys_key(sqlite_url: str, gateway_key: str) -> None:
    ingress = StandInIngress()
    async with (
        serve(ingress.app()) as ingress_url,
        delivery(sqlite_url, ingress_url) as d,
        httpx.AsyncClient(base_url=d.url) as http,
    ):
        token, _ = d.sessions.issue("chat-1", "alice", "acme", "Alice")
        other, _ = d.sessions.issue("chat-2", "mallory", "acme")
        expired, _ = d.sessions.issue("chat-1", "alice", "acme", now=time.time() - 7200)
        url = "/v1/web/chat-1/messages"
        sent = await http.post(url, headers=bearer(token), json={"id": "m-1", "text": "hello"})
        spoof = await http.post(url, headers=bearer(token), json={"text": "hi", "user_id": "ceo"})
        anonymous = await http.post(url, json={"text": "hi"})
        in_query = await http.post(url, params={"token": token}, json={"text": "hi"})
        stale = await http.post(url, headers=bearer(expired), json={"text": "hi"})
        elsewhere = await http.post(url, headers=bearer(other), json={"text": "hi"})
        empty = await http.post(url, headers=bearer(token), json={"text": ""})
    assert sent.status_code == 202, sent.text
    assert spoof.status_code == 422 and "user_id" in spoof.text
    assert [r.status_code for r in (anonymous, in_query, stale)] == [401, 401, 401]
    assert elsewhere.status_code == 403 and empty.status_code == 422
    assert len(ingress.received) == 1  # only the one valid post reached ingress
    authorization, body = ingress.received[0]
    assert authorization == f"Bearer {gateway_key}"
    assert (body["id"], body["platform"], body["chat_id"], body["text"]) == ("m-1", "web", "chat-1", "hello")
    assert body["user"] == {"id": "alice", "name": "Alice", "tenant_id": "acme"}


async def test_forwarder_errors_are_clear(sqlite_url: str, gateway_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    refusing = StandInIngress(status=403)
    async with (
        serve(refusing.app()) as refusing_url,
        delivery(sqlite_url, refusing_url) as d,
        delivery(sqlite_url, f"http://127.0.0.1:{free_port()}") as down,
        delivery(sqlite_url, refusing_url, api_key_env=None) as unconfigured,
        httpx.AsyncClient() as http,
    ):
        token, _ = d.sessions.issue("chat-1", "alice", "default")
        refused = await http.post(f"{d.url}/v1/web/chat-1/messages", headers=bearer(token), json={"text": "hi"})
        token, _ = down.sessions.issue("chat-1", "alice", "default")
        unreachable = await http.post(f"{down.url}/v1/web/chat-1/messages", headers=bearer(token), json={"text": "hi"})
        token, _ = unconfigured.sessions.issue("chat-1", "alice", "default")
        no_key = await http.post(
            f"{unconfigured.url}/v1/web/chat-1/messages", headers=bearer(token), json={"text": "hi"}
        )
        monkeypatch.setenv(GATEWAY_ENV, "")
        token, _ = d.sessions.issue("chat-1", "alice", "default")
        empty_env = await http.post(f"{d.url}/v1/web/chat-1/messages", headers=bearer(token), json={"text": "hi"})
    assert refused.status_code == 502 and "delivery's credential" in refused.json()["detail"]
    assert unreachable.status_code == 502 and "ingress unreachable" in unreachable.json()["detail"]
    assert no_key.status_code == 503 and "platforms.web.api_key_env" in no_key.json()["detail"]
    assert empty_env.status_code == 503 and GATEWAY_ENV in empty_env.json()["detail"]
    assert len(refusing.received) == 1


async def test_posts_the_inbound_contract_refuses_are_422(sqlite_url: str, gateway_key: str) -> None:
    ingress = StandInIngress()
    long_chat = "c" * 201
    async with (
        serve(ingress.app()) as ingress_url,
        delivery(sqlite_url, ingress_url) as d,
        httpx.AsyncClient(base_url=d.url) as http,
    ):
        token, _ = d.sessions.issue(long_chat, "alice", "default")
        too_long = await http.post(f"/v1/web/{long_chat}/messages", headers=bearer(token), json={"text": "hi"})
        token, _ = d.sessions.issue("chat-1", "alice", "default")
        control = await http.post(
            "/v1/web/chat-1/messages", headers=bearer(token), json={"text": "hi", "id": "m\u0007"}
        )
    assert too_long.status_code == 422 and "chat_id" in too_long.json()["detail"]
    assert control.status_code == 422 and control.json()["detail"].startswith("id: String should match pattern")
    assert ingress.received == []


def stand_in_persistence(seen: list[tuple[str, str | None]]) -> FastAPI:
    """Two runs of `acme/web:chat-1` in tenant acme (one stopped) and one of another tenant, over two pages.
    (Keys carry the tenant, so another tenant's run would not be under this key; the stand-in has one to
    show the tenant filter still holds.)"""
    app = FastAPI()
    runs = [
        {"run_id": "r1", "tenant_id": "acme", "status": "completed", "reason": None, "error": None},
        {"run_id": "r2", "tenant_id": "acme", "status": "interrupted", "reason": "user", "error": None},
        {"run_id": "rx", "tenant_id": "other", "status": "completed", "reason": None, "error": None},
        {
            "run_id": "r3",
            "tenant_id": "acme",
            "status": "failed",
            "reason": "error",
            "error": "boom",
            "session_id": "s2",
        },
    ]
    messages = [
        {"root_run_id": "r1", "role": "user", "content": "hello", "session_id": "s1"},
        {"root_run_id": "r1", "role": "assistant", "content": "", "session_id": "s1"},
        {"root_run_id": "r1", "role": "tool", "content": "{}", "session_id": "s1"},
        {"root_run_id": "r1", "role": "assistant", "content": "## Hi\n\n| a |\n|---|\n| **b** |", "session_id": "s1"},
        {"root_run_id": "rx", "role": "user", "content": "not yours", "session_id": "s1"},
        {"root_run_id": "r2", "role": "user", "content": "tell me more", "session_id": "s1"},
        {"root_run_id": "r2", "role": "assistant", "content": "Well", "session_id": "s1"},
        {"root_run_id": "r3", "role": "user", "content": "and now?", "session_id": "s2"},
    ]

    @app.get("/v1/conversations/{key:path}/runs")
    async def conversation_runs(key: str, request: Request) -> dict[str, Any]:
        seen.append((key, request.headers.get("authorization")))
        return {"items": runs, "next_cursor": None}

    @app.get("/v1/conversations/{key:path}/messages")
    async def conversation_messages(key: str, cursor: str | None = None) -> dict[str, Any]:
        if cursor is None:
            return {"items": messages[:4], "next_cursor": "page-2"}
        return {"items": messages[4:], "next_cursor": None}

    return app


async def test_history_has_both_sides_of_the_sessions_tenant_with_endings(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str | None]] = []
    async with (
        serve(stand_in_persistence(seen)) as persistence_url,
        delivery(sqlite_url, "http://127.0.0.1:1", persistence_url=persistence_url) as d,
        httpx.AsyncClient(base_url=d.url) as http,
    ):
        token, _ = d.sessions.issue("chat-1", "alice", "acme")
        other, _ = d.sessions.issue("chat-2", "alice", "acme")
        without_key = await http.get("/v1/web/chat-1/history", headers=bearer(token))
        monkeypatch.setenv(HISTORY_ENV, HISTORY_KEY)
        found = await http.get("/v1/web/chat-1/history", headers=bearer(token))
        anonymous = await http.get("/v1/web/chat-1/history")
        elsewhere = await http.get("/v1/web/chat-1/history", headers=bearer(other))
    assert without_key.status_code == 503 and "history_key_env" in without_key.text
    assert found.status_code == 200, found.text
    # Answers as their live final frames show them: rendered, the ending's words appended to the run's
    # last answer (the stopped marker) or, nothing of the run shown, a message of their own.
    table = "<table>\n<thead>\n<tr>\n<th>a</th>\n</tr>\n</thead>\n<tbody>\n<tr>\n<td><strong>b</strong></td>\n</tr>\n</tbody>\n</table>"
    assert [
        (i["role"], i["text"], i["markup"], i["run_id"], i["ending"], i["session_id"]) for i in found.json()["items"]
    ] == [
        ("user", "hello", "plain", "r1", None, "s1"),
        ("assistant", f"<h2>Hi</h2>\n{table}", "html", "r1", None, "s1"),
        ("user", "tell me more", "plain", "r2", None, "s1"),
        ("assistant", "<p>Well ⏹ stopped</p>", "html", "r2", "stopped", "s1"),
        ("user", "and now?", "plain", "r3", None, "s2"),
        ("assistant", "<p>⚠️ The run failed: boom</p>", "html", "r3", "failed", "s2"),
    ]
    assert seen == [("acme/web:chat-1", f"Bearer {HISTORY_KEY}")]  # the session's tenant's conversation
    assert (anonymous.status_code, elsewhere.status_code) == (401, 403)


async def test_history_is_502_when_persistence_refuses_or_is_unreachable(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusing = FastAPI()

    @refusing.get("/v1/conversations/{key:path}/runs")
    async def runs(key: str) -> JSONResponse:
        return JSONResponse({"detail": "bad key"}, 401)

    monkeypatch.setenv(HISTORY_ENV, HISTORY_KEY)
    async with (
        serve(refusing) as persistence_url,
        delivery(sqlite_url, "http://127.0.0.1:1", persistence_url=persistence_url) as d,
        httpx.AsyncClient(base_url=d.url) as http,
    ):
        token, _ = d.sessions.issue("chat-1", "alice", "acme")
        refused = await http.get("/v1/web/chat-1/history", headers=bearer(token))
    async with (
        delivery(sqlite_url, "http://127.0.0.1:1", persistence_url=f"http://127.0.0.1:{free_port()}") as d,
        httpx.AsyncClient(base_url=d.url) as http,
    ):
        token, _ = d.sessions.issue("chat-1", "alice", "acme")
        unreachable = await http.get("/v1/web/chat-1/history", headers=bearer(token))
    assert refused.status_code == 502 and "persistence answered 401" in refused.json()["detail"]
    assert unreachable.status_code == 502 and "persistence unreachable" in unreachable.json()["detail"]


async def test_the_stream_resumes_after_last_event_id(sqlite_url: str) -> None:
    async with delivery(sqlite_url, "http://127.0.0.1:1") as d, httpx.AsyncClient(base_url=d.url) as http:
        token, _ = d.sessions.issue("chat-1", "alice", "default")
        target = ReplyTarget(platform="web", chat_id="chat-1")
        await d.adapter.send(target, "first", final=True)
        await d.adapter.send(target, "second", final=True)
        async with http.stream("GET", "/v1/web/chat-1/events", params={"token": token}) as resp:
            body = ""
            async for chunk in resp.aiter_text():
                body += chunk
                if body.count("data: ") == 2:
                    break
        first_id = body.split("id: ", 1)[1].split("\n", 1)[0]
        headers = {"Last-Event-ID": first_id}
        async with http.stream("GET", "/v1/web/chat-1/events", params={"token": token}, headers=headers) as resp:
            resumed = ""
            async for chunk in resp.aiter_text():
                resumed += chunk
                if "data: " in resumed:
                    break
    assert '"text": "second"' in resumed and '"text": "first"' not in resumed
