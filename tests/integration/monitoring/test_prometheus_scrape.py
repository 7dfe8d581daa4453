"""A real Prometheus (Debian's package) scrapes the embedded stack with monitoring/prometheus.yml
— only its targets, intervals and token file changed — while the stack answers messages: every
panel query of the overview dashboard returns data, every alert rule evaluates without error
over series that exist, and each service exports its group's consumer lag."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agentstream.contracts import RunFinished
from agentstream.kafka import free_port
from agentstream.testing.fixtures import ADMIN_TOKEN
from agentstream.testing.kafka import produce_raw
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.metrics_doc import alert_rules, dashboard_queries, metric_names
from agentstream_stack.run_follower import send_and_follow
from tests.e2e.conftest import DEMO_ANSWER, inbound

ROOT = Path(__file__).resolve().parents[3]
MONITORING = ROOT / "monitoring"
PROMETHEUS = shutil.which("prometheus")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus not installed (Debian's `prometheus` package; .ci/run installs it)"
)


def _config(tmp_path: Path, ports: dict[str, int]) -> Path:
    """monitoring/prometheus.yml pointed at this stack: 1 s scrapes and rule evaluations."""
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(MONITORING / name) for name in config["rule_files"]]
    token = tmp_path / "metrics-token"
    token.write_text(ADMIN_TOKEN)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [f"127.0.0.1:{ports[job['job_name']]}"]}]
        job["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """(its URL, a function that starts it with a config)."""
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start(config: Path) -> None:
        assert PROMETHEUS is not None
        procs.append(
            subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=(tmp_path / "prometheus.log").open("wb"),
            )
        )

    yield f"http://127.0.0.1:{port}", start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


async def _ready(http: httpx.AsyncClient) -> None:
    async with asyncio.timeout(30):
        while True:
            try:
                if (await http.get("/-/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)


async def _query(http: httpx.AsyncClient, expr: str) -> list[dict[str, Any]]:
    body = (await http.get("/api/v1/query", params={"query": expr})).json()
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


async def _until_every_query_answers(http: httpx.AsyncClient, exprs: list[str], timeout: float) -> list[str]:
    """The queries still without data when `timeout` ran out (none: all answered)."""
    pending = list(exprs)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while pending and loop.time() < deadline:
        pending = [e for e in pending if not await _query(http, e)]
        if pending:
            await asyncio.sleep(1)
    return pending


@pytest.mark.timeout(240)  # a stack, a Prometheus and five-minute rate windows filled at 1 s
async def test_every_panel_and_alert_has_data_while_the_stack_answers(settings_factory, prometheus, tmp_path):
    url, start_prometheus = prometheus
    ports = free_ports()
    settings = settings_factory(kafka={"lag_interval_s": 1.0})
    async with (
        embedded_stack(settings, start_broker=False, ports=ports, state_file=None) as stack,
        httpx.AsyncClient(base_url=url, timeout=10) as http,
    ):
        start_prometheus(_config(tmp_path, ports))
        await _ready(http)
        bootstrap = stack.settings.kafka.bootstrap_servers
        await produce_raw(bootstrap, stack.services["ingress"].topics.inbound, b"{not json", key=b"memory:bad")
        for _ in range(3):
            events = await send_and_follow(stack.settings.kafka, inbound(), timeout=60)
            assert isinstance(events[-1], RunFinished) and events[-1].text == DEMO_ANSWER

        panels = dashboard_queries()
        exprs = [e for es in panels.values() for e in es]
        silent = await _until_every_query_answers(http, exprs, timeout=90)
        assert not silent, f"panel queries without data: {silent}"

        # Alerts that should not fire return nothing: each evaluated without error, over series that exist.
        rules = alert_rules()
        series = sorted({name for expr in rules.values() for name in metric_names(expr)})
        missing = await _until_every_query_answers(http, [f'group({{__name__="{name}"}})' for name in series], 30)
        assert not missing, f"series an alert reads that no target exports: {missing}"
        async with asyncio.timeout(30):
            while True:
                groups = (await http.get("/api/v1/rules")).json()["data"]["groups"]
                evaluated = {
                    r["name"]: r for g in groups for r in g["rules"] if r.get("lastEvaluation", "").startswith("2")
                }
                if set(rules) <= set(evaluated) and all(r["health"] != "unknown" for r in evaluated.values()):
                    break
                await asyncio.sleep(1)
        assert {name: r["health"] for name, r in evaluated.items()} == {name: "ok" for name in rules}
        assert not [r["lastError"] for r in evaluated.values() if r.get("lastError")]

        groups = {r["metric"]["group"] for r in await _query(http, "agentstream_consumer_lag")}
        prefix = settings.kafka.topic_prefix
        assert {
            f"{prefix}{name}" for name in ("ingress", "agent-runner", "tool-executor", "delivery", "persistence")
        } <= groups
        dead = await _query(http, 'agentstream_dead_letters_total{job="ingress", reason="invalid_json"}')
        assert dead and float(dead[0]["value"][1]) == 1
