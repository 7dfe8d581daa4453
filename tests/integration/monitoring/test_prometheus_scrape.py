"""A real Prometheus (Debian's package) scrapes the embedded stack with monitoring/prometheus.yml
— only its targets, intervals and token file changed — while the stack answers messages: every
panel query of the overview dashboard returns data, every alert expression returns data once its
thresholds are made `bool` comparisons (the alerts themselves do not fire) and its rule evaluates
without error, each service exports its group's consumer lag, and `agentstream top` finds every
figure it shows."""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from rich.console import Console

from agentstream.contracts import RunFinished
from agentstream.kafka import free_port
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.metrics_doc import alert_rules, dashboard_queries
from agentstream_stack.run_follower import send_and_follow
from agentstream_stack.top import run_top
from agentstream_testing.commands import command_path
from agentstream_testing.fixtures import ADMIN_TOKEN
from agentstream_testing.kafka import produce_raw
from tests.e2e.conftest import DEMO_ANSWER, inbound

ROOT = Path(__file__).resolve().parents[3]

DASHBOARD_VARIABLES = re.compile(r"\$(namespace|job)\b")


def all_selected(expr: str) -> str:
    """A panel query as Grafana sends it with the namespace and job variables at "All"."""
    return DASHBOARD_VARIABLES.sub(".*", expr)


MONITORING = ROOT / "monitoring"


# A comparison with a number filters a series out; with `bool` it keeps it, valued 0 or 1.
_THRESHOLD = re.compile(r"(==|!=|>=|<=|>|<)\s*(?=-?[0-9.])")


def as_bool(expr: str) -> str:
    """An alert expression that returns its series whether the alert would fire or not."""
    return _THRESHOLD.sub(r"\1 bool ", expr)


def test_as_bool_keeps_label_matchers_and_turns_every_threshold() -> None:
    expr = 'sum(rate(x{outcome=~"a|b",n!="1"}[5m])) > 0.1 and up{job="r"} == 0'
    assert as_bool(expr) == 'sum(rate(x{outcome=~"a|b",n!="1"}[5m])) > bool 0.1 and up{job="r"} == bool 0'


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
    binary = command_path("prometheus", installed_by="Debian's `prometheus` package; .ci/run installs it")
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def start(config: Path) -> None:
        procs.append(
            subprocess.Popen(
                [
                    binary,
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
        # As Grafana sends them with every variable at "All" (its allValue `.*`): `namespace=~".*"` also
        # matches these series, which have no namespace label (no Kubernetes here).
        exprs = [all_selected(e) for es in panels.values() for e in es]
        assert exprs and not any("$" in e for e in exprs), exprs
        silent = await _until_every_query_answers(http, exprs, timeout=90)
        assert not silent, f"panel queries without data: {silent}"

        # Alerts that should not fire return nothing: with `bool` thresholds, each expression
        # returns its series: every selector, label matcher and `and` join finds data.
        rules = alert_rules()
        assert all(as_bool(expr) != expr for expr in rules.values()), "an alert without a threshold"
        silent = await _until_every_query_answers(http, [as_bool(expr) for expr in rules.values()], timeout=30)
        assert not silent, f"alert expressions without data: {silent}"
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

        # `agentstream top` against the same services: every figure read from what they export.
        out = io.StringIO()
        await run_top(stack.urls, ADMIN_TOKEN, 0.5, once=True, as_json=True, console=Console(file=out))
        frame = json.loads(out.getvalue())
        assert all(s["up"] for s in frame["services"].values()), frame["services"]
        absent = [name for name, value in frame["figures"].items() if value is None]
        assert not absent, f"figures top finds in no service's metrics: {absent}"

        groups = {r["metric"]["group"] for r in await _query(http, "agentstream_consumer_lag")}
        prefix = settings.kafka.topic_prefix
        assert {
            f"{prefix}{name}" for name in ("ingress", "agent-runner", "tool-executor", "delivery", "persistence")
        } <= groups
        dead = await _query(http, 'agentstream_dead_letters_total{job="ingress", reason="invalid_json"}')
        assert dead and float(dead[0]["value"][1]) == 1
