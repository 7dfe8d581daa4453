"""schemathesis against the checked-in OpenAPI document, on a running ingress: no 5xx."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_ingress import IngressService

DOC = Path(__file__).resolve().parents[3] / "docs" / "openapi-ingress.json"
EXAMPLES = 40
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")


def fuzz(base_url: str) -> list[str]:
    """Run every operation's examples (blocking: it runs in a worker thread); returns what was called."""
    schema = schemathesis.openapi.from_path(DOC)
    called: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(case=operation.as_strategy())
        def check(case) -> None:  # type: ignore[no-untyped-def]
            response = case.call(base_url=base_url, timeout=10)
            assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code}"

        check()
        called.append(f"{operation.method.upper()} {operation.path}")
    return called


async def test_no_server_errors(settings_factory, topics_created, monkeypatch):
    monkeypatch.setenv("T_TG_SECRET", "tg-secret")
    monkeypatch.setenv("T_SLACK_SECRET", "slack-secret")
    settings = settings_factory(ingress={"webhooks": {"telegram": {"main": {"secret_env": "T_TG_SECRET"}},
                                                      "slack": {"signing_secret_env": "T_SLACK_SECRET"}}})
    svc = IngressService(settings)
    host = ServiceHost([svc], "127.0.0.1", {"ingress": free_port()})
    async with host:
        called = await asyncio.to_thread(fuzz, host.url("ingress"))
    assert {"POST /v1/messages", "POST /webhooks/telegram/{bot}", "POST /webhooks/slack"} <= set(called)
