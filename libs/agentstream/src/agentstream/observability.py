"""Structured logs (structlog, JSON) and the per-service HTTP surface.

Every service exposes ``/healthz`` (liveness: the process answers; no Kafka),
``/readyz`` (broker reachable and database answering, plus any check a service adds;
a failing check may say why) and ``/metrics`` (Prometheus).
"""

from __future__ import annotations

import contextvars
import logging
import sys
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import structlog
from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest

from agentstream.api_docs import docs_page
from agentstream.auth import AUTH_RESPONSES, Authenticator, Principal, Scope, authenticate, requires
from agentstream.logthrottle import ThrottleFilter
from agentstream.secrets_mask import mask_secrets, register_settings_secrets

if TYPE_CHECKING:
    from agentstream.config import Settings

ReadyCheck = Callable[[], Awaitable[bool]]


_RECORDS_PUBLISHED: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


def records_published(registry: CollectorRegistry) -> Counter:
    """`agentstream_records_published_total{service,topic}` of `registry`, made on first use: the
    service and the publishers its bootstrap builds before it count into the same one."""
    counter = _RECORDS_PUBLISHED.get(registry)
    if counter is None:
        counter = _RECORDS_PUBLISHED[registry] = Counter(
            "agentstream_records_published_total",
            "Records handed to the producer",
            ["service", "topic"],
            registry=registry,
        )
    return counter


class NotReady(Exception):
    """Raised by a ready check that fails for a reason worth showing in `/readyz`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_configured = False
# Loggers too chatty at INFO; httpx's INFO line is every request URL (a Telegram URL carries the bot token).
QUIET_LOGGERS = ("aiokafka", "uvicorn.access", "alembic", "httpx", "httpcore", "faststream")


def configure_logging(
    level: str = "INFO", json: bool = True, log_file: str | None = None, settings: Settings | None = None
) -> None:
    """Route stdlib and structlog output through one JSON renderer (stderr or `log_file`).

    Every record passes `mask_secrets` last before rendering; with `settings`, the secret values
    they configure are registered for masking first.
    """
    global _configured
    if settings is not None:
        register_settings_secrets(settings)
    lvl = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        drop_unset_context,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        # The level first: a line below it costs one check, not the chain (context, timestamp)
        # the stdlib logger would then drop; the tool-executor's line per call at WARNING was 3% of its CPU.
        processors=[structlog.stdlib.filter_by_level, *shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler: logging.Handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                mask_secrets,  # after the traceback is text: a secret in an exception is masked too
                renderer,
            ],
        )
    )
    # Kafka outages repeat the same lines many times a second: once per interval, with a count.
    handler.addFilter(ThrottleFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    for noisy in QUIET_LOGGERS:
        logging.getLogger(noisy).setLevel(max(lvl, logging.WARNING))
    _configured = True


LOG_CONTEXT_KEYS = ("service", "run_id", "root_run_id", "conversation_key")


def drop_unset_context(_: object, __: str, event: structlog.types.EventDict) -> structlog.types.EventDict:
    """A record without a run (an inbound message, a catalogue entry) leaves its run fields out."""
    for key in LOG_CONTEXT_KEYS:
        if key in event and event[key] is None:
            del event[key]
    return event


def _log_values(
    service: str | None, record: object, run_id: str | None, root_run_id: str | None, conversation_key: str | None
) -> dict[str, str | None]:
    run_id = run_id or getattr(record, "run_id", None)
    root_run_id = root_run_id or getattr(record, "root_run_id", None) or run_id
    conversation_key = conversation_key or getattr(record, "conversation_key", None)
    # Unknown fields are bound as None: a value of the previous record must not leak into this one.
    values = {"run_id": run_id, "root_run_id": root_run_id, "conversation_key": conversation_key}
    if service is not None:
        values["service"] = service
    return values


@contextmanager
def record_log_context(
    service: str | None,
    record: object = None,
    *,
    run_id: str | None = None,
    root_run_id: str | None = None,
    conversation_key: str | None = None,
) -> Iterator[None]:
    """Every log line inside the block — ours, FastStream's, aiokafka's — carries the service and
    the record's run and conversation (structlog contextvars), so one run can be followed across
    services by its `run_id`. Fields come from `record` (any contract with `run_id`,
    `root_run_id`, `conversation_key`) unless given; a run command's `run_id` is its root's.
    Tasks started inside the block keep the values; on exit the previous ones are back.
    `service` None: keep the one bound around (a run's task, started inside a handler's block)."""
    # Reset by tokens, not `bound_contextvars` (which reads every bound value to restore them):
    # the same effect at a third of the CPU, paid per record by every handler.
    tokens = structlog.contextvars.bind_contextvars(
        **_log_values(service, record, run_id, root_run_id, conversation_key)
    )
    try:
        yield
    finally:
        structlog.contextvars.reset_contextvars(**tokens)


def record_task_context(service: str | None, record: object) -> contextvars.Context:
    """A copy of the current context with `record`'s fields bound as `record_log_context` binds
    them, for a task of its own (`asyncio.create_task(coro, context=...)`): the same log lines
    as a task started inside `record_log_context`, at a third of the cost (nothing to unbind)."""
    context = contextvars.copy_context()
    context.run(structlog.contextvars.bind_contextvars, **_log_values(service, record, None, None, None))
    return context


def get_logger(name: str, **bound: object) -> structlog.stdlib.BoundLogger:
    return structlog.get_logger(name).bind(**bound)  # type: ignore[no-any-return]


def http_app(service: str, registry: CollectorRegistry, checks: dict[str, ReadyCheck], auth: Authenticator) -> FastAPI:
    """The operational endpoints; services add their own routes to the returned app.

    Only `/healthz` and `/readyz` answer without a credential: `/metrics` needs the scrape token
    or a key with `metrics:read`, the OpenAPI document and its `/docs` page any valid credential.
    """
    app = FastAPI(title=f"agentstream {service}", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.auth = auth

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_: Principal = Depends(authenticate)) -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request, _: Principal = Depends(authenticate)) -> HTMLResponse:
        return HTMLResponse(docs_page(app.openapi(), str(request.base_url)))

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @app.get("/readyz", tags=["ops"])
    async def readyz() -> JSONResponse:
        results: dict[str, bool] = {}
        reasons: dict[str, str] = {}
        for name, check in checks.items():
            try:
                results[name] = bool(await check())
            except NotReady as err:
                results[name], reasons[name] = False, err.reason
            except Exception as err:  # a failing check means "not ready", never a 500
                # The type only: an exception's text may carry hosts or credentials.
                results[name], reasons[name] = False, type(err).__name__
        ok = all(results.values())
        body = {"ready": ok, "service": service, "checks": results, "reasons": reasons}
        return JSONResponse(body, status_code=200 if ok else 503)

    @app.get("/metrics", tags=["ops"], responses=AUTH_RESPONSES)
    async def metrics(_: Principal = requires(Scope.METRICS_READ)) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
