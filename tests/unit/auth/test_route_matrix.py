"""Every HTTP route of every service, found by walking the built apps (so a new route is checked the
moment it exists): without a credential or with a bad one → 401; with a real API key that lacks the
route's scope → 403; with the route's scope (and with the admin token) → past authentication.

Only the health checks, the platform webhooks (their own secrets) and the web page's static assets
answer anonymously.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.types import Message, Receive, Scope, Send

from agentstream.auth import KeyStore, Principal, authenticate
from agentstream.auth import Scope as AuthScope
from agentstream.auth.web_sessions import WebSessions
from agentstream.config import SERVICES
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.service import Service
from agentstream_stack.services import build_service
from agentstream_testing.fixtures import ADMIN_HEADERS, make_test_settings

PUBLIC_PATHS = {"/healthz", "/readyz", "/web/{chat_id}", "/web/static/{name}", "/favicon.ico"}
PUBLIC_PREFIXES = ("/webhooks/",)  # platform webhooks check their platform's secret instead

ANY = "any valid credential"
SESSION = "a web session token of that chat"
# The credential each route needs: the scopes that let a key through (admin always does). A route
# missing here fails `test_route_matrix`: decide its scope before it ships.
NEEDS: dict[tuple[str, str], frozenset[AuthScope] | str] = {
    ("GET", "/metrics"): frozenset({AuthScope.METRICS_READ}),
    ("GET", "/openapi.json"): ANY,
    ("GET", "/docs"): ANY,
    # a gateway key is let through only when the body names one of its platforms (test_identity_binding)
    ("POST", "/v1/messages"): frozenset({AuthScope.MESSAGES_WRITE}),
    ("GET", "/v1/streams"): frozenset({AuthScope.ADMIN}),
    ("GET", "/v1/memory/chats/{chat_id}"): frozenset({AuthScope.ADMIN}),
    ("GET", "/v1/runs"): frozenset({AuthScope.CONVERSATIONS_READ}),
    ("GET", "/v1/runs/{run_id}"): frozenset({AuthScope.CONVERSATIONS_READ}),
    ("GET", "/v1/conversations/{key:path}/runs"): frozenset({AuthScope.CONVERSATIONS_READ}),
    ("GET", "/v1/conversations/{key:path}/messages"): frozenset({AuthScope.CONVERSATIONS_READ}),
    ("GET", "/v1/runs/{run_id}/resume-steps"): frozenset({AuthScope.RUNS_RESUME}),
    ("GET", "/v1/web/{chat_id}/events"): SESSION,
    ("GET", "/v1/web/{chat_id}/history"): SESSION,
    ("POST", "/v1/web/{chat_id}/messages"): SESSION,
    # a messages:write key gets a session for itself; a gateway key only for its own platforms (web:
    # tests/unit/delivery/test_web_http.py), which the matrix's keys do not name
    ("POST", "/v1/web/sessions"): frozenset({AuthScope.MESSAGES_WRITE}),
}

# Routes still answering anonymously on this branch. Each runs as a strict expected failure: the
# day a route is protected its case starts passing, which fails the run until it is removed here.
# This list only shrinks.
STILL_OPEN: dict[tuple[str, str, str], str] = {}

KEY_SCOPES = [s for s in AuthScope if s is not AuthScope.ADMIN]
WELL_FORMED_UNKNOWN_KEY = "agsk_000000000000_" + "A" * 43
STREAM_WAIT_S = 5.0


def _settings(db_url: str) -> Any:
    # Nothing here starts a broker: the apps are called in-process.
    return make_test_settings("127.0.0.1:1", "matrix.", db_url)


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _discover() -> list[tuple[str, str, str]]:
    found = []
    for name in SERVICES:
        svc = build_service(name, _settings("sqlite+aiosqlite:///:memory:"))
        for route in svc.http.routes:
            if isinstance(route, APIRoute) and not _public(route.path):
                found.extend((name, method, route.path) for method in sorted(route.methods))
    return found


ROUTES = _discover()


def _case(route: tuple[str, str, str]) -> Any:
    reason = STILL_OPEN.get(route)
    marks = [pytest.mark.xfail(strict=True, reason=f"still open: {reason}")] if reason else []
    return pytest.param(*route, id=" ".join(route), marks=marks)


def _fill(path: str) -> str:
    """Path parameters filled with dummies (`{key:path}` gets a conversation-key-like value)."""
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: "telegram:555" if m.group(2) == ":path" else f"x-{m.group(1)}", path)


def stops_at_stream_start(app: FastAPI) -> Any:
    """The app, except that an event stream is ended right after its status: the matrix wants the status,
    and an in-process transport would otherwise wait for the (endless) stream to finish."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        started = asyncio.Event()

        async def sending(message: Message) -> None:
            if started.is_set():
                return
            await send(message)
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    started.set()

        task = asyncio.ensure_future(app(scope, receive, sending))
        stream = asyncio.ensure_future(started.wait())
        await asyncio.wait([task, stream], timeout=STREAM_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        stream.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if not started.is_set():
                raise TimeoutError(f"{scope['method']} {scope['path']}: no answer in {STREAM_WAIT_S}s")
        else:
            task.result()

    return wrapped


@dataclass
class Credentials:
    keys: dict[AuthScope, str]  # one real API key per scope, holding only that scope
    admin_key: str
    revoked: str


async def _make_credentials(db_url: str) -> Credentials:
    await upgrade(db_url)
    engine = create_engine(db_url)
    store = KeyStore(session_factory(engine))
    keys = {s: (await store.create(f"only {s.value}", {s})).token for s in KEY_SCOPES}
    admin = (await store.create("admin key", {AuthScope.ADMIN})).token
    revoked = await store.create("revoked", {AuthScope.ADMIN})
    await store.revoke(revoked.key_id)
    await engine.dispose()
    return Credentials(keys, admin, revoked.token)


@pytest.fixture(scope="module")
def keys_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Credentials]:
    """One migrated SQLite database with the keys, shared by the module (read-only after this)."""
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('matrix') / 'keys.db'}"
    return url, asyncio.run(_make_credentials(url))


@pytest.fixture
def credentials(keys_db: tuple[str, Credentials]) -> Credentials:
    return keys_db[1]


@pytest.fixture
async def service(request: pytest.FixtureRequest, keys_db: tuple[str, Credentials]) -> AsyncIterator[Service]:
    svc = build_service(request.param, _settings(keys_db[0]))
    yield svc
    await svc.infra.auth.close()


async def _status(client: httpx.AsyncClient, method: str, path: str, token: str | None, scheme: str = "Bearer") -> int:
    headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
    payload: dict[str, Any] = {} if path.endswith("/sessions") else {"text": "hi"}
    body = {"json": payload} if method in {"POST", "PUT", "PATCH"} else {}
    response = await client.request(method, path, headers=headers, **body)
    if response.status_code == 401:
        assert "Bearer" in response.headers.get("www-authenticate", ""), f"{method} {path}: 401 without a challenge"
    return response.status_code


async def check_route(
    app: FastAPI, method: str, path: str, credentials: Credentials, sessions: WebSessions | None = None
) -> None:
    needs = NEEDS.get((method, path))
    transport = httpx.ASGITransport(app=stops_at_stream_start(app))
    url = _fill(path)
    admin_token = ADMIN_HEADERS["Authorization"].split()[1]
    async with httpx.AsyncClient(transport=transport, base_url="http://matrix") as client:
        refused = {
            "no credential": await _status(client, method, url, None),
            "garbage bearer": await _status(client, method, url, "garbage"),
            "well-formed unknown key": await _status(client, method, url, WELL_FORMED_UNKNOWN_KEY),
            "revoked admin key": await _status(client, method, url, credentials.revoked),
            "admin token as Basic": await _status(client, method, url, admin_token, scheme="Basic"),
        }
        assert refused == dict.fromkeys(refused, 401), f"{method} {path} answers without a valid credential: {refused}"
        assert needs is not None, f"{method} {path} is not in NEEDS: decide which scope it requires"
        if needs == SESSION:
            # The page's routes take the session token of their chat, never an API key.
            assert sessions is not None, f"{method} {path}: a session route on a service without web sessions"
            own, _ = sessions.issue("x-chat_id", "u1", "default")
            other, _ = sessions.issue("another-chat", "u1", "default")
            assert await _status(client, method, url, credentials.admin_key) == 401, f"{method} {path}: an API key"
            assert await _status(client, method, url, admin_token) == 401, f"{method} {path}: the admin token"
            assert await _status(client, method, url, other) == 403, f"{method} {path}: another chat's session"
            assert await _status(client, method, url, own) not in (401, 403), f"{method} {path}: its own session"
            return
        by_scope = {s: await _status(client, method, url, token) for s, token in credentials.keys.items()}
        admin = [
            await _status(client, method, url, credentials.admin_key),
            await _status(client, method, url, admin_token),
        ]
    assert all(code not in (401, 403) for code in admin), f"{method} {path}: admin refused ({admin})"
    for scope, code in by_scope.items():
        if needs == ANY or scope in needs:
            assert code not in (401, 403), f"{method} {path}: a {scope.value} key is refused ({code})"
        else:
            assert code == 403, f"{method} {path}: a key with only {scope.value} got {code}, not 403"


@pytest.mark.parametrize(("service", "method", "path"), [_case(r) for r in ROUTES], indirect=["service"])
async def test_route_matrix(service: Service, method: str, path: str, credentials: Credentials) -> None:
    await check_route(service.http, method, path, credentials, getattr(service, "web_sessions", None))


async def test_the_matrix_catches_an_open_route_and_a_missing_scope_check(
    keys_db: tuple[str, Credentials], credentials: Credentials
) -> None:
    """The check itself fails on the two mistakes it exists for."""
    svc = build_service("ingress", _settings(keys_db[0]))

    @svc.http.get("/v1/oops")
    async def oops() -> dict[str, str]:
        return {"open": "yes"}

    @svc.http.get("/v1/streams")  # needs admin, but takes any credential here
    async def any_key(_: Principal = Depends(authenticate)) -> dict[str, str]:
        return {}

    with pytest.raises(AssertionError, match="answers without a valid credential"):
        await check_route(svc.http, "GET", "/v1/oops", credentials)
    with pytest.raises(AssertionError, match="got 200, not 403"):
        await check_route(svc.http, "GET", "/v1/streams", credentials)
    await svc.infra.auth.close()


def test_discovery_sees_every_service_and_the_known_routes() -> None:
    """The matrix is only as good as the walk: it must find what is known to exist."""
    found = {(n, m, p) for n, m, p in ROUTES}
    for name in SERVICES:
        assert (name, "GET", "/metrics") in found and (name, "GET", "/openapi.json") in found
    assert ("ingress", "POST", "/v1/messages") in found
    assert ("persistence", "GET", "/v1/conversations/{key:path}/messages") in found
    assert ("delivery", "GET", "/v1/streams") in found
    assert not any(_public(p) for _, _, p in ROUTES)
    stale = set(STILL_OPEN) - found
    assert not stale, f"STILL_OPEN names routes that no longer exist: {stale}"


def test_public_routes_are_only_the_listed_ones() -> None:
    """What answers anonymously is exactly what is meant to: a new public path must be added on purpose."""
    public = set()
    for name in SERVICES:
        svc = build_service(name, _settings("sqlite+aiosqlite:///:memory:"))
        public |= {r.path for r in svc.http.routes if isinstance(r, APIRoute) and _public(r.path)}
    assert public == PUBLIC_PATHS | {"/webhooks/telegram/{bot}", "/webhooks/slack"}
