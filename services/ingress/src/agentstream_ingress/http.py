"""The HTTP front door: `POST /v1/messages` and the platform webhooks.

Every endpoint only validates and writes an `InboundMessage` to `inbound`; the consumer
pipeline makes every decision (dedupe, authz, commands, …), so a message posted here and
one produced to Kafka are treated alike. Publishing is bounded by
`ingress.publish_timeout_s`: when Kafka is slow the caller gets a clear 503, never a hang.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentstream.auth import Principal, authenticate
from agentstream.config import Settings
from agentstream.contracts import InboundMessage
from agentstream.contracts.unicode import unencodable
from agentstream.observability import NotReady
from agentstream_ingress.identity import PostedMessage, Refused, bind_identity, source_of
from agentstream_ingress.route_authz import authorize_route
from agentstream_ingress.webhooks import InvalidUpdate, slack, telegram

Produce = Callable[[InboundMessage], Awaitable[None]]


class MessageAccepted(BaseModel):
    conversation_key: str
    message_id: str


class Problem(BaseModel):
    detail: str


class FieldError(BaseModel):
    loc: list[str | int]
    msg: str


class ValidationProblem(BaseModel):
    """422: where the body is wrong and how, never the submitted values."""

    detail: list[FieldError]


# Webhook bodies are read raw (the secret or signature is checked before any parsing);
# the document still says they are JSON objects.
JSON_OBJECT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
    }
}


class BodyLimit:
    """ASGI middleware: bodies over `limit` bytes get 413 before any handler reads them."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await _too_large(send, self.limit)
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except BodyTooLarge:
            await _too_large(send, self.limit)


class BodyTooLarge(Exception):
    pass


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps({"detail": f"request body larger than {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _problem(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


async def _validation_problem(request: Request, exc: Exception) -> JSONResponse:
    # FastAPI's default handler echoes each error's `input` (and `ctx`): a caller's own
    # data, possibly huge, sent back into whatever logs or renders the response.
    assert isinstance(exc, RequestValidationError)
    errors = [FieldError(loc=list(e["loc"]), msg=e["msg"]) for e in exc.errors()]
    return JSONResponse(ValidationProblem(detail=errors).model_dump(), status_code=422)


def _invalid(err: ValidationError) -> JSONResponse:
    errors = [FieldError(loc=["body", *e["loc"]], msg=e["msg"]) for e in err.errors()]
    return JSONResponse(ValidationProblem(detail=errors).model_dump(), status_code=422)


def _not_unicode(value: object) -> JSONResponse | None:
    """400 for text that is not valid Unicode (an escaped lone surrogate Python's json lets through):
    the sender's fault, which would otherwise fail the write to Kafka like an outage."""
    reason = unencodable(value)
    return None if reason is None else _problem(400, f"text that is not valid Unicode: {reason}")


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except ValueError:  # includes UnicodeDecodeError
        return None
    return payload if isinstance(payload, dict) else None


def register(app: FastAPI, settings: Settings, produce: Produce) -> None:
    cfg = settings.ingress
    app.add_middleware(BodyLimit, limit=cfg.max_body_bytes)
    app.add_exception_handler(RequestValidationError, _validation_problem)
    errors: dict[int | str, dict[str, Any]] = {
        503: {"model": Problem, "description": "Kafka did not accept the message in time."}
    }
    invalid: dict[int | str, dict[str, Any]] = {
        422: {"model": ValidationProblem, "description": "Validation error: where and what, not the values."}
    }
    webhook_errors: dict[int | str, dict[str, Any]] = {
        400: {"model": Problem, "description": "Not a JSON object, invalid ids, or text that is not valid Unicode."},
        401: {"model": Problem},
        404: {"model": Problem},
        **errors,
    }

    async def accept(msg: InboundMessage) -> JSONResponse:
        try:
            async with asyncio.timeout(cfg.publish_timeout_s):
                await produce(msg)
        except NotReady as err:  # known before trying: broker lost, topics gone (our own words, no hosts)
            return _problem(503, f"kafka unavailable: {err.reason}")
        except TimeoutError:
            return _problem(503, f"kafka did not accept the message within {cfg.publish_timeout_s}s")
        except Exception as err:  # broker down, not started, …: say so instead of a 500
            return _problem(503, f"kafka unavailable: {type(err).__name__}")
        return JSONResponse(
            MessageAccepted(conversation_key=msg.conversation_key, message_id=msg.id).model_dump(), status_code=202
        )

    @app.post(
        "/v1/messages",
        status_code=202,
        tags=["messages"],
        response_model=MessageAccepted,
        responses={
            400: {"model": Problem, "description": "Text that is not valid Unicode (a lone surrogate)."},
            401: {"model": Problem},
            403: {"model": Problem},
            413: {"model": Problem},
            **invalid,
            **errors,
        },
    )
    async def post_message(post: PostedMessage, principal: Principal = Depends(authenticate)) -> JSONResponse:
        """Send a message as if produced to `inbound`; the answer streams to its reply target.

        Who sent it comes from the credential (see docs/ingress.md "Identity"): a `gateway` key relays
        end users' messages as given; any other key with `messages:write` posts as itself."""
        if (refused := _not_unicode(post)) is not None:
            return refused
        try:
            bound = bind_identity(post, principal)
        except ValidationError as err:  # e.g. a credential's user id too long to be a chat id
            return _invalid(err)
        if isinstance(bound, Refused):
            return _problem(403, bound.detail)
        if (not_usable := authorize_route(bound, principal, settings)) is not None:
            return _problem(403, not_usable.detail)
        # The credential is the source (never the body's claim): one caller cannot dedupe away another's ids.
        return await accept(bound.model_copy(update={"source": source_of(principal)}))

    @app.post(
        "/webhooks/telegram/{bot}",
        tags=["webhooks"],
        responses={**webhook_errors, **invalid},
        openapi_extra=JSON_OBJECT_BODY,
    )
    async def telegram_webhook(
        bot: str,
        request: Request,
        secret: str | None = Header(default=None, alias=telegram.SECRET_HEADER),
    ) -> JSONResponse:
        """A Telegram Bot API update (`setWebhook` with `secret_token`)."""
        hook = cfg.webhooks.telegram.get(bot)
        if hook is None:
            return _problem(404, "no such telegram bot")
        if not telegram.secret_ok(hook.secret(), secret):  # before the body is even read
            return _problem(401, "bad or missing secret token")
        update = _json_object(await request.body())
        if update is None:
            return _problem(400, "body is not a JSON object")
        if (refused := _not_unicode(update)) is not None:
            return refused
        try:
            msg = telegram.to_inbound(update, bot)
        except InvalidUpdate:
            return _problem(400, "invalid update")
        if msg is None:
            return JSONResponse({"ok": True, "ignored": True})
        return await accept(msg)

    @app.post("/webhooks/slack", tags=["webhooks"], responses=webhook_errors, openapi_extra=JSON_OBJECT_BODY)
    async def slack_webhook(request: Request) -> JSONResponse:
        """Slack Events API (signed requests; the `url_verification` challenge is answered)."""
        hook = cfg.webhooks.slack
        if hook is None:
            return _problem(404, "slack is not configured")
        body = await request.body()
        check = slack.check_signature(
            hook.secret(),
            request.headers.get(slack.TIMESTAMP_HEADER),
            request.headers.get(slack.SIGNATURE_HEADER),
            body,
            time.time(),
            hook.max_age_s,
        )
        if check is not slack.SignatureCheck.OK:
            return _problem(401, f"signature check failed: {check.value}")
        payload = _json_object(body)
        if payload is None:
            return _problem(400, "body is not a JSON object")
        if (refused := _not_unicode(payload)) is not None:
            return refused
        if payload.get("type") == "url_verification":
            return JSONResponse({"challenge": payload.get("challenge")})
        try:
            msg = slack.to_inbound(payload)
        except InvalidUpdate:
            return _problem(400, "invalid update")
        if msg is None:  # other events and bot-authored messages: acknowledged, dropped
            return JSONResponse({"ok": True, "ignored": True})
        return await accept(msg)
