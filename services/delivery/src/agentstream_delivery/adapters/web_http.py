"""HTTP side of the web adapter: the chat page, its sessions, its SSE stream, and the message forwarder.

- `GET /web/{chat_id}`, `GET /web/static/{name}`: the page (static HTML + JS + CSS + icon; public, no data);
  `GET /favicon.ico`: the page's icon where a browser looks for it unasked (public, as the page);
- `POST /v1/web/sessions` (an API key or JWT, see `web_identity`): a session token for one chat and
  one user, and the page URL `/web/{chat_id}#token=…` (a fragment never reaches a server's logs);
- `GET /v1/web/{chat_id}/events?token=…` (or `Authorization: Bearer`): `text/event-stream` of that
  chat's message frames (EventSource cannot send headers, hence the query parameter); each frame's
  `id` is its Kafka coordinates, and `Last-Event-ID` (the browser's reconnect) resumes after it;
- `GET /v1/web/{chat_id}/history` with `Authorization: Bearer <session token>`: the conversation's
  messages, both sides, from persistence (`web_history`);
- `POST /v1/web/{chat_id}/messages` `{"text", "id"?}` with `Authorization: Bearer <session token>`:
  an `InboundMessage` (platform `web`) whose user and tenant are the session's, posted to ingress
  `POST /v1/messages` at `platforms.web.api_url` with delivery's own gateway key
  (`platforms.web.api_key_env`). The page posts to its own origin, so no CORS setup is needed.
A missing, invalid or expired session token → 401; a valid one of another chat → 403.
"""

from __future__ import annotations

import os
from datetime import datetime
from importlib.resources import files
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import Depends, FastAPI, Header, HTTPException, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentstream.auth import AUTH_RESPONSES, Principal, WebSession, WebSessions, authenticate, bearer_token
from agentstream.contracts import InboundMessage, User, new_id
from agentstream.kafka.decoding import describe_validation_error
from agentstream_delivery.adapters.web import FrameId, WebAdapter
from agentstream_delivery.adapters.web_history import ConversationHistory, History
from agentstream_delivery.adapters.web_identity import (
    WEB_PLATFORM,
    SessionRequest,
    session_identity,
)

STATIC = files("agentstream_delivery.adapters") / "static"
STATIC_TYPES = {
    "chat.js": "text/javascript",
    "highlight.js": "text/javascript",
    "chat.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
SESSION_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid session token."},
    403: {"description": "The session token is for another chat."},
}


class WebPost(BaseModel):
    """What the page posts. Who posts is the session's user: the body cannot name one."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=20_000)
    id: str = Field(default_factory=new_id, min_length=1, max_length=256, description="Idempotency key.")


class SessionIssued(BaseModel):
    token: str
    chat_id: str
    user_id: str
    tenant_id: str
    expires_at: datetime
    url: str = Field(description="The chat page with the token in the URL fragment.")


def page_path(chat_id: str, token: str) -> str:
    return f"/web/{quote(chat_id, safe='')}#token={token}"


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": 'Bearer realm="agentstream-web"'})


def add_web_routes(
    app: FastAPI,
    adapter: WebAdapter,
    sessions: WebSessions,
    ingress_url: str,
    api_key_env: str | None,
    history: ConversationHistory,
    timeout_s: float = 10.0,
) -> None:
    def session_of(chat_id: str, token: str | None) -> WebSession:
        session = sessions.verify(token)
        if session is None:
            raise _unauthorized("missing, invalid or expired web session token")
        if session.chat_id != chat_id:
            raise HTTPException(403, "this session token is for another chat")
        return session

    @app.get("/web/{chat_id}", response_class=HTMLResponse, tags=["web"])
    async def chat_page(chat_id: str) -> HTMLResponse:
        return HTMLResponse((STATIC / "chat.html").read_text(encoding="utf-8"))

    @app.get("/web/static/{name}", tags=["web"], responses={404: {"description": "No such file of the page."}})
    async def static_file(name: str) -> Response:
        if name not in STATIC_TYPES:
            raise HTTPException(404)
        return Response((STATIC / name).read_text(encoding="utf-8"), media_type=STATIC_TYPES[name])

    @app.get("/favicon.ico", tags=["web"])
    async def favicon() -> Response:
        # The SVG icon itself: browsers read the content type, not the name.
        return Response((STATIC / "favicon.svg").read_text(encoding="utf-8"), media_type="image/svg+xml")

    @app.post("/v1/web/sessions", tags=["web"], status_code=201, responses=AUTH_RESPONSES)
    async def create_session(req: SessionRequest, principal: Principal = Depends(authenticate)) -> SessionIssued:
        who = session_identity(req, principal)
        token, session = sessions.issue(who.chat_id, who.user_id, who.tenant_id, who.name)
        return SessionIssued(
            token=token,
            chat_id=session.chat_id,
            user_id=session.user_id,
            tenant_id=session.tenant_id,
            expires_at=session.expires_at,
            url=page_path(session.chat_id, token),
        )

    @app.get("/v1/web/{chat_id}/events", tags=["web"], responses=SESSION_RESPONSES)
    async def chat_events(
        chat_id: str,
        token: str | None = Query(default=None, description="The session token (EventSource sends no headers)."),
        authorization: str | None = Header(default=None),
        last_event_id: str | None = Header(default=None, description="The last frame id the page saw."),
    ) -> StreamingResponse:
        session = session_of(chat_id, token or bearer_token(authorization))
        return StreamingResponse(
            adapter.frames(chat_id, FrameId.parse(last_event_id), tenant_id=session.tenant_id),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.get(
        "/v1/web/{chat_id}/history",
        tags=["web"],
        responses={**SESSION_RESPONSES, 502: {"description": "persistence failed"}, 503: {"description": "no key"}},
    )
    async def chat_history(chat_id: str, authorization: str | None = Header(default=None)) -> History:
        session = session_of(chat_id, bearer_token(authorization))
        return await history.read(chat_id, session.tenant_id)

    @app.post("/v1/web/{chat_id}/messages", tags=["web"], responses=SESSION_RESPONSES)
    async def post_message(
        chat_id: str, post: WebPost, authorization: str | None = Header(default=None)
    ) -> JSONResponse:
        session = session_of(chat_id, bearer_token(authorization))
        api_key = os.environ.get(api_key_env) if api_key_env else None
        if not api_key:
            return JSONResponse(
                {
                    "detail": "delivery has no credential to forward web messages to ingress: set "
                    "platforms.web.api_key_env to an env var holding a key with the 'gateway' scope "
                    "for platform 'web'" + (f" (env var {api_key_env} is empty)" if api_key_env else "")
                },
                status_code=503,
            )
        try:  # the contract bounds ids and refuses control characters, the chat id in the path included
            user = User(id=session.user_id, name=session.name, tenant_id=session.tenant_id)
            message = InboundMessage(id=post.id, platform=WEB_PLATFORM, chat_id=chat_id, user=user, text=post.text)
        except ValidationError as err:
            return JSONResponse({"detail": describe_validation_error(err)}, status_code=422)
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                response = await client.post(
                    f"{ingress_url.rstrip('/')}/v1/messages",
                    content=message.model_dump_json(exclude_none=True),
                    headers={"content-type": "application/json", "authorization": f"Bearer {api_key}"},
                )
        except httpx.HTTPError as err:
            return JSONResponse({"detail": f"ingress unreachable: {err!r}"}, status_code=502)
        body: Any
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text}
        if response.status_code in (401, 403):
            # Delivery's own key was refused: the page's session is fine, so this is not the page's 401.
            detail = body.get("detail") if isinstance(body, dict) else body
            return JSONResponse(
                {"detail": f"ingress refused delivery's credential (platforms.web.api_key_env): {detail}"},
                status_code=502,
            )
        return JSONResponse(body, status_code=response.status_code)
