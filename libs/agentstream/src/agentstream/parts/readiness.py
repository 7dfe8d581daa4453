"""The readiness part: the named checks `/readyz` runs on every request, and the ops HTTP app
(`/healthz`, `/readyz`, `/metrics`, `/openapi.json`, `/docs`) a service adds its routes to."""

from __future__ import annotations

import asyncio

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from agentstream.auth import Authenticator
from agentstream.observability import ReadyCheck, http_app

DB_CHECK_TIMEOUT_S = 2.0


class Readiness:
    def __init__(self, service: str, registry: CollectorRegistry, auth: Authenticator) -> None:
        self.checks: dict[str, ReadyCheck] = {}  # read on every request: a check added later counts
        self.http: FastAPI = http_app(service, registry, self.checks, auth)

    def add(self, name: str, check: ReadyCheck) -> None:
        self.checks[name] = check


def database_ready(engine: AsyncEngine) -> ReadyCheck:
    """A check that the database answers `SELECT 1` within DB_CHECK_TIMEOUT_S."""

    async def check() -> bool:
        async with asyncio.timeout(DB_CHECK_TIMEOUT_S), engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return True

    return check
