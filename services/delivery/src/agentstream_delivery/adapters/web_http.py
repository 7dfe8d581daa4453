"""HTTP side of the web adapter: the chat page, its SSE stream, and the message forwarder.

- `GET /web/{chat_id}`: the chat page (static HTML + JS + CSS from `static/`);
- `GET /v1/web/{chat_id}/events`: `text/event-stream` of that chat's message frames;
- `POST /v1/web/{chat_id}/messages` `{"text", "user_id"?, "user_name"?, "id"?}`: builds an
  `InboundMessage` (platform `web`) and posts it to ingress `POST /v1/messages` at
  `platforms.web.api_url` (default: this host's ingress port). The page posts here, to its
  own origin, so no CORS setup is needed between the two services.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, Field, ValidationError

from agentstream.contracts import InboundMessage, User, new_id
from agentstream.service import describe_validation_error
from agentstream_delivery.adapters.web import WebAdapter

STATIC = files("agentstream_delivery.adapters") / "static"
STATIC_TYPES = {"chat.js": "text/javascript", "chat.css": "text/css"}


class WebPost(BaseModel):
    text: str = Field(min_length=1, max_length=20_000)
    user_id: str = Field(default="web-user", min_length=1, max_length=256)
    user_name: str | None = None
    id: str = Field(default_factory=new_id, min_length=1, max_length=256, description="Idempotency key.")


def add_web_routes(app: FastAPI, adapter: WebAdapter, ingress_url: str, timeout_s: float = 10.0) -> None:
    @app.get("/web/{chat_id}", response_class=HTMLResponse, tags=["web"])
    async def chat_page(chat_id: str) -> HTMLResponse:
        return HTMLResponse((STATIC / "chat.html").read_text(encoding="utf-8"))

    @app.get("/web/static/{name}", tags=["web"])
    async def static_file(name: str) -> Response:
        if name not in STATIC_TYPES:
            raise HTTPException(404)
        return Response((STATIC / name).read_text(encoding="utf-8"), media_type=STATIC_TYPES[name])

    @app.get("/v1/web/{chat_id}/events", tags=["web"])
    async def chat_events(chat_id: str) -> StreamingResponse:
        return StreamingResponse(adapter.frames(chat_id), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.post("/v1/web/{chat_id}/messages", tags=["web"])
    async def post_message(chat_id: str, post: WebPost) -> JSONResponse:
        try:  # the contract bounds ids and refuses control characters, the chat id in the path included
            message = InboundMessage(id=post.id, platform="web", chat_id=chat_id,
                                     user=User(id=post.user_id, name=post.user_name), text=post.text)
        except ValidationError as err:
            return JSONResponse({"detail": describe_validation_error(err)}, status_code=422)
        body: Any
        try:
            async with httpx.AsyncClient(timeout=timeout_s) as client:
                response = await client.post(f"{ingress_url.rstrip('/')}/v1/messages",
                                             content=message.model_dump_json(exclude_none=True),
                                             headers={"content-type": "application/json"})
        except httpx.HTTPError as err:
            return JSONResponse({"detail": f"ingress unreachable: {err!r}"}, status_code=502)
        try:
            body = response.json()
        except ValueError:
            body = {"detail": response.text}
        return JSONResponse(body, status_code=response.status_code)
