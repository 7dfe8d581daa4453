"""Builds the delivery service: every collaborator made here from the settings and `Infra`, then passed in."""

from __future__ import annotations

from rich.console import Console

from agentstream.auth import WebSessions
from agentstream.config import Settings
from agentstream.parts.readiness import database_ready
from agentstream.retention import RetentionTask
from agentstream.service import Infra, Runtime
from agentstream_delivery.app import DeliveryService
from agentstream_delivery.current_runs import CurrentRuns
from agentstream_delivery.hooks import HookRuntime
from agentstream_delivery.ledger import Ledger, MemoryLedger, ReceiptQueue, SqlLedger
from agentstream_delivery.platforms import Adapters
from agentstream_delivery.ratelimit import RateLimiter
from agentstream_delivery.relay import Relay
from agentstream_delivery.retention import delivery_purges


def bootstrap(settings: Settings, *, console: Console | None = None, ledger: Ledger | None = None) -> DeliveryService:
    """`console`: where the console platform draws (default: the terminal). `ledger`: instead of the
    database ledger (tests that never start the service, so never migrate its database)."""
    # The database: hooks (billing, audit) and the delivery ledger.
    infra = Infra.build(settings, DeliveryService.name, uses_database=True)
    assert infra.engine is not None  # uses_database
    runtime = Runtime(infra, checks={"database": database_ready(infra.engine)})
    receipts = ReceiptQueue()
    if ledger is None:
        ledger = MemoryLedger(receipts.put) if infra.sessions is None else SqlLedger(infra.sessions, receipts.put)
    return DeliveryService(
        runtime,
        adapters=Adapters.build(settings, infra.log, console),
        rate_limiter=RateLimiter(),
        ledger=ledger,
        receipts=receipts,
        current_runs=CurrentRuns(),
        hooks=HookRuntime(settings, infra.registry, infra.log, infra.sessions),
        relay=Relay(settings.relay),
        retention=RetentionTask(delivery_purges, settings, infra.registry, infra.log),
        web_sessions=WebSessions(settings.auth.web),
    )
