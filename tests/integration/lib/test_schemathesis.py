"""schemathesis against the HTTP APIs of running services, with credentials so that the generated
requests get past authentication into the handlers: no 5xx.

Every status answered must be one the operation's document lists. Ingress is fuzzed from the
checked-in OpenAPI document, once with the admin token (it may assert any
identity, so most bodies are produced to Kafka) and once with a `messages:write` API key (bodies
naming other identities are refused); persistence, agent-runner, tool-executor and delivery from
their apps' own documents.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from agentstream.auth import KeyStore, Scope
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fixtures import ADMIN_HEADERS

DOC = Path(__file__).resolve().parents[3] / "docs" / "openapi-ingress.json"
EXAMPLES = 40
MESSAGES = "POST /v1/messages"
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")

Statuses = dict[str, Counter[int]]  # "METHOD /path" → how often each status was answered


def _examples(operation: Any, base_url: str, headers: dict[str, str], statuses: Counter[int]) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=operation.as_strategy())
    def check(case) -> None:  # type: ignore[no-untyped-def]
        response = case.call(base_url=base_url, headers=headers, timeout=10)
        statuses[response.status_code] += 1
        assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code}"

    check()


def fuzz(schema: Any, base_url: str, headers: dict[str, str], only: set[str] | None = None) -> Statuses:
    """Run every operation's examples (blocking: it runs in a worker thread); the statuses seen."""
    seen: Statuses = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        name = f"{operation.method.upper()} {operation.path}"
        if only is None or name in only:
            _examples(operation, base_url, headers, seen.setdefault(name, Counter()))
    return seen


async def _key(db_url: str, scopes: set[Scope]) -> str:
    await upgrade(db_url)
    engine = create_engine(db_url)
    try:
        return (await KeyStore(session_factory(engine)).create("fuzz", scopes)).token
    finally:
        await engine.dispose()


async def test_ingress_no_server_errors_with_credentials(settings_factory, topics_created, monkeypatch):
    monkeypatch.setenv("T_TG_SECRET", "tg-secret")
    monkeypatch.setenv("T_SLACK_SECRET", "slack-secret")
    settings = settings_factory(
        ingress={
            "webhooks": {
                "telegram": {"main": {"secret_env": "T_TG_SECRET"}},
                "slack": {"signing_secret_env": "T_SLACK_SECRET"},
            }
        }
    )
    writer = await _key(settings.database.url, {Scope.MESSAGES_WRITE})
    schema = schemathesis.openapi.from_path(DOC)
    host = ServiceHost([bootstrap_ingress(settings)], "127.0.0.1", {"ingress": free_port()})
    async with host:
        as_admin = await asyncio.to_thread(fuzz, schema, host.url("ingress"), ADMIN_HEADERS)
        as_writer = await asyncio.to_thread(
            fuzz, schema, host.url("ingress"), {"Authorization": f"Bearer {writer}"}, {MESSAGES}
        )
    assert {MESSAGES, "POST /webhooks/telegram/{bot}", "POST /webhooks/slack"} <= set(as_admin)
    for run in (as_admin, as_writer):
        # Every generated request got past authentication, and valid ones were produced to Kafka.
        assert 401 not in run[MESSAGES] and run[MESSAGES][202] > 0, run[MESSAGES]
        assert _undocumented(schema, run) == {}, run


async def test_persistence_read_api_no_server_errors_with_credentials(settings_factory, topics_created):
    """Persistence's read API, from the document its app serves (`app.openapi()`)."""
    svc = bootstrap_persistence(settings_factory())
    schema = schemathesis.openapi.from_dict(svc.http.openapi())
    host = ServiceHost([svc], "127.0.0.1", {"persistence": free_port()})
    async with host:
        seen = await asyncio.to_thread(fuzz, schema, host.url("persistence"), ADMIN_HEADERS)
    reads = {name: statuses for name, statuses in seen.items() if name.startswith("GET /v1/")}
    assert "GET /v1/conversations/{key}/messages" in reads and "GET /v1/runs/{run_id}/resume-steps" in reads
    for name, statuses in reads.items():
        assert 401 not in statuses and 403 not in statuses, (name, statuses)
    assert _undocumented(schema, seen) == {}, seen


def _undocumented(schema: Any, seen: Statuses) -> dict[str, set[int]]:
    """Statuses answered that the operation's document does not list (nor a `default` response)."""
    documented: dict[str, set[str]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        documented[f"{operation.method.upper()} {operation.path}"] = set(operation.definition.raw.get("responses", {}))
    return {
        name: bad
        for name, statuses in seen.items()
        if "default" not in documented[name]
        and (bad := {code for code in statuses if str(code) not in documented[name]})
    }


@pytest.mark.parametrize("service", ["agent-runner", "tool-executor", "delivery"])
async def test_the_other_services_no_server_errors_nor_undocumented_statuses(service, settings_factory, topics_created):
    """Every service's own document (`app.openapi()`), fuzzed with the admin credential: no 5xx, and
    every status answered is one its document lists."""
    from agentstream_stack.services import build_service

    svc = build_service(service, settings_factory())
    schema = schemathesis.openapi.from_dict(svc.http.openapi())
    host = ServiceHost([svc], "127.0.0.1", {service: free_port()})
    async with host:
        seen = await asyncio.to_thread(fuzz, schema, host.url(service), ADMIN_HEADERS)
    assert seen, f"{service}: no operation in its document"
    assert _undocumented(schema, seen) == {}, seen
