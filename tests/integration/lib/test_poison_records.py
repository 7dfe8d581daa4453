"""Poison records on every service's topic, on the real broker: each one becomes a DeadLetter naming
topic, partition and offset, is logged with the same fields, and the next good record is still handled."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from rich.console import Console
from structlog.testing import capture_logs

from agentstream.contracts import DeadLetter, Notice, ReplyTarget, StartRun, ToolCallRequest, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream.service import Service
from agentstream_delivery import DeliveryService
from agentstream_delivery.bootstrap import bootstrap as bootstrap_delivery
from agentstream_ingress.bootstrap import bootstrap as bootstrap_ingress
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import produce_raw, read_until
from agentstream_testing.signed_calls import signed
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor
from tests.integration.persistence.test_app import run_events

pytestmark = pytest.mark.integration

POISON = [
    b"[" * 5000,  # nested past any recursion limit
    b"\xff\xfe{\x80 not utf-8",
    json.dumps({"type": "something.else", "hello": ["world"]}).encode(),  # valid JSON, wrong shape
    json.dumps({"hello": "world"}).encode(),
]

Good = Callable[[Service, str, str], Awaitable[None]]  # (service, bootstrap, prefix): produce one, await its effect


async def good_run_command(svc: Service, bootstrap: str, prefix: str) -> None:
    start = StartRun(
        run_id="good-1",
        conversation_key="web:good",
        assistant_id="default",
        user=User(id="u1"),
        text="hello",
        reply_target=ReplyTarget(platform="web", chat_id="good"),
    )
    await produce_raw(bootstrap, f"{prefix}runs", start.to_json(), key=b"web:good")
    await read_until(bootstrap, f"{prefix}events", lambda rs: any(b'"run.finished"' in (r.value or b"") for r in rs))


async def good_run_events(svc: Service, bootstrap: str, prefix: str) -> None:
    for value in run_events("good-1", "hello?", "hi"):
        await produce_raw(bootstrap, f"{prefix}events", value, key=b"memory:chat-p")
    async with httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=_urls[svc.name], timeout=5) as http:
        for _ in range(300):
            if (await http.get("/v1/runs/good-1")).status_code == 200:
                return
            await asyncio.sleep(0.1)
    raise AssertionError("the good run was not stored")


async def good_tool_call(svc: Service, bootstrap: str, prefix: str) -> None:
    call = signed(
        ToolCallRequest(
            run_id="good-1",
            root_run_id="good-1",
            conversation_key="web:good",
            call_id="c1",
            tool="calculator",
            arguments='{"expression": "6*7"}',
        )
    )
    await produce_raw(bootstrap, f"{prefix}tool-calls", call.to_json(), key=b"web:good")
    await read_until(bootstrap, f"{prefix}tool-results", lambda rs: any(b'"42"' in (r.value or b"") for r in rs))


async def good_inbound(svc: Service, bootstrap: str, prefix: str) -> None:
    msg = {"id": "good-1", "platform": "web", "chat_id": "good", "user": {"id": "u1"}, "text": "hello"}
    await produce_raw(bootstrap, f"{prefix}inbound", json.dumps(msg).encode(), key=b"web:good")
    await read_until(bootstrap, f"{prefix}runs", lambda rs: any(b'"good-1"' in (r.value or b"") for r in rs))


async def good_notice(svc: Service, bootstrap: str, prefix: str) -> None:
    assert isinstance(svc, DeliveryService)
    notice = Notice(
        run_id="n1",
        root_run_id="n1",
        conversation_key="memory:good",
        seq=0,
        text="still here",
        reply_target=ReplyTarget(platform="memory", chat_id="good"),
    )
    await produce_raw(bootstrap, f"{prefix}events", notice.to_json(), key=b"memory:good")
    await svc.memory.wait_for("good", lambda ms: any("still here" in m.text for m in ms), 30)


_urls: dict[str, str] = {}  # service name → its HTTP base URL in the running test


def build(name: str, settings: Any) -> Service:
    match name:
        case "agent-runner":
            return runner_bootstrap(settings)
        case "persistence":
            return bootstrap_persistence(settings)
        case "tool-executor":
            return bootstrap_tool_executor(settings)
        case "ingress":
            return bootstrap_ingress(settings)
        case "delivery":
            return bootstrap_delivery(settings, console=Console(file=io.StringIO()))
    raise AssertionError(name)


CASES: list[tuple[str, str, Good]] = [
    ("agent-runner", "runs", good_run_command),
    ("persistence", "events", good_run_events),
    ("tool-executor", "tool-calls", good_tool_call),
    ("ingress", "inbound", good_inbound),
    ("delivery", "events", good_notice),
]


@pytest.mark.parametrize(("service", "topic", "good"), CASES, ids=[c[0] for c in CASES])
async def test_poison_records_are_dead_lettered_logged_and_passed(
    service: str, topic: str, good: Good, settings_factory, topics_created
):
    settings = settings_factory()
    bootstrap, prefix = settings.kafka.bootstrap_servers, settings.kafka.topic_prefix
    source_topic = f"{prefix}{topic}"
    with capture_logs() as logs:
        svc = build(service, settings)
        port = free_port()
        _urls[svc.name] = f"http://127.0.0.1:{port}"
        async with ServiceHost([svc], "127.0.0.1", {svc.name: port}):
            for value in POISON:
                await produce_raw(bootstrap, source_topic, value, key=b"poison")
            dlq = await read_until(bootstrap, f"{prefix}dlq", lambda rs: len(rs) >= len(POISON))
            await good(svc, bootstrap, prefix)

    source = await read_until(bootstrap, source_topic, lambda rs: len(rs) >= len(POISON))
    where = {r.value: (r.topic, r.partition, r.offset) for r in source}
    letters = [DeadLetter.model_validate_json(r.value or b"") for r in dlq]
    named = {(lt.source_topic, lt.source_partition, lt.source_offset) for lt in letters}
    assert named == {where[v] for v in POISON}
    assert all(lt.service == svc.name and lt.key == "poison" and lt.error for lt in letters)
    assert all("Traceback" not in lt.error and "\n" not in lt.error for lt in letters)
    logged = {
        (e.get("topic"), e.get("partition"), e.get("offset"))
        for e in logs
        if e["event"] in ("dead letter", "handler failed")
    }
    assert named <= logged, logs
