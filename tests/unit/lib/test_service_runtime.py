"""The runtime a service holds (agentstream.service.Runtime) and the lifecycle `ServiceHost` runs:
composition, not inheritance. A service is a plain class; its `bootstrap` gives it the readiness
checks it needs; the runtime runs the service's own steps in the one order."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest

from agentstream.config import SERVICES, load_settings
from agentstream.service import Infra, Runtime
from tests.unit.lib.test_contracts_typing import mypy

ROOT = Path(__file__).resolve().parents[3]
SERVICE_CLASSES = {  # name → (directory under services/, package, the class in its app.py)
    "ingress": ("ingress", "agentstream_ingress", "IngressService"),
    "agent-runner": ("agent-runner", "agentstream_runner", "AgentRunnerService"),
    "tool-executor": ("tool-executor", "agentstream_tools", "ToolExecutorService"),
    "delivery": ("delivery", "agentstream_delivery", "DeliveryService"),
    "persistence": ("persistence", "agentstream_persistence", "PersistenceService"),
}


@pytest.mark.parametrize("name", SERVICES)
def test_no_service_inherits_a_base_class(name: str) -> None:
    directory, package, cls = SERVICE_CLASSES[name]
    tree = ast.parse((ROOT / "services" / directory / "src" / package / "app.py").read_text(encoding="utf-8"))
    [found] = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == cls]
    assert found.bases == [], f"{cls} inherits {[ast.unparse(b) for b in found.bases]}"


async def readyz(runtime: Runtime) -> dict[str, object]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=runtime.http), base_url="http://t") as http:
        response = await http.get("/readyz")
    assert response.status_code == 503
    body: dict[str, object] = response.json()
    return body


async def test_a_runtime_checks_the_broker_first_then_what_its_bootstrap_gave_it() -> None:
    settings = load_settings()
    bare = Runtime(Infra.build(settings, "bare", uses_database=False))

    async def database() -> bool:
        return True

    with_db = Runtime(Infra.build(settings, "with-db", uses_database=False), checks={"database": database})
    try:
        bare_body = await readyz(bare)
        assert bare_body["checks"] == {"broker": False}  # no database, no database check
        body = await readyz(with_db)
        checks = body["checks"]
        assert isinstance(checks, dict) and list(checks) == ["broker", "database"]
        assert checks == {"broker": False, "database": True} and body["reasons"] == {"broker": "not started"}
    finally:
        await bare.stop()
        await with_db.stop()


async def test_the_service_steps_run_where_the_lifecycle_puts_them() -> None:
    runtime = Runtime(Infra.build(load_settings(), "steps", uses_database=False))
    steps: list[str] = []

    async def on_drain() -> None:
        steps.append("drain")

    async def on_stop() -> None:
        steps.append("stop")

    await runtime.drain(1.0, on_drain)  # not started: nothing to drain
    assert steps == [] and not runtime.draining
    runtime.started = True  # as after `start` (which needs a broker): the drain now runs the service's
    await runtime.drain(1.0, on_drain)
    assert steps == ["drain"] and runtime.draining
    await runtime.stop(on_stop)  # the broker's stop first (never started: nothing), then the service's
    assert steps == ["drain", "stop"] and not runtime.started


@pytest.mark.timeout(120)  # runs mypy, slow on a cold cache
def test_the_host_takes_any_object_with_the_lifecycle_and_refuses_one_without_a_drain() -> None:
    out, status = mypy(ROOT / "tests" / "typing" / "service_lifecycle.py")
    assert status == 0, out  # the refusal is an error (an unneeded ignore would be one too)
