"""monitoring/: promtool accepts the Prometheus configuration and the alert rules, and each alert
fires in its condition and stays quiet outside it (`promtool test rules`); the dashboard and the
Grafana provisioning agree on the data source."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentstream.config import SERVICES
from agentstream_testing.commands import command_path

ROOT = Path(__file__).resolve().parents[3]
MONITORING = ROOT / "monitoring"

SECRET_FILE = "/run/secrets/metrics_token"  # compose's secret `metrics_token`


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = command_path("promtool", installed_by="Debian's `prometheus` package; .ci/run installs it")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=30, check=False)


def test_promtool_accepts_the_configuration_with_its_rule_file(tmp_path: Path) -> None:
    # The token file is the deployment's secret: an empty stand-in next to the copies.
    shutil.copy(MONITORING / "alerts.yml", tmp_path / "alerts.yml")
    token = tmp_path / "metrics-token"
    token.write_text("token\n")
    config = (MONITORING / "prometheus.yml").read_text().replace(SECRET_FILE, str(token))
    (tmp_path / "prometheus.yml").write_text(config)
    result = _promtool("check", "config", str(tmp_path / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout + result.stderr


def test_promtool_accepts_the_alert_rules() -> None:
    result = _promtool("check", "rules", str(MONITORING / "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 rules found" in result.stdout + result.stderr


def test_one_scrape_job_per_service() -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    assert [job["job_name"] for job in config["scrape_configs"]] == list(SERVICES)
    assert all(job["authorization"]["credentials_file"] == SECRET_FILE for job in config["scrape_configs"])


def test_every_panel_reads_the_chosen_data_source_and_the_provisioned_one_is_prometheus() -> None:
    source = yaml.safe_load((MONITORING / "grafana/provisioning/datasources/prometheus.yml").read_text())
    assert source["datasources"][0]["type"] == "prometheus"
    dashboard = json.loads((MONITORING / "grafana/dashboards/agentstream-overview.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    # No hard-coded uid: an imported dashboard asks for its Prometheus.
    assert panels and all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    assert all(
        t.get("datasource", {}).get("uid", "${datasource}") == "${datasource}" for p in panels for t in p["targets"]
    )
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_no_two_panels_of_the_dashboard_overlap() -> None:
    # Grafana moves overlapping panels on load, so a panel added where another sits lands elsewhere.
    dashboard = json.loads((MONITORING / "grafana/dashboards/agentstream-overview.json").read_text())
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[x, y]!r}"
                cells[x, y] = panel["title"]


METRIC_SELECTOR = re.compile(r"\b((?:agentstream|process|python)_[a-z_]+|up)\b(\{[^}]*\})?(?!\s*\()")


def test_every_series_of_every_panel_is_filtered_by_namespace_and_job() -> None:
    dashboard = json.loads((MONITORING / "grafana/dashboards/agentstream-overview.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for name in ("namespace", "job"):
        # "All" is `.*`: it also matches series without the label (compose has no namespace).
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"
    selectors = [
        match
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for match in METRIC_SELECTOR.finditer(target["expr"])
    ]
    assert len(selectors) > 30
    unfiltered = [m.group(0) for m in selectors if 'namespace=~"$namespace", job=~"$job"' not in (m.group(2) or "")]
    assert unfiltered == []


def _deploy_anchors() -> set[str]:
    headings = re.findall(r"^#+ (.+)$", (ROOT / "docs" / "deploy.md").read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_alert_has_a_runbook_section_in_deploy_md() -> None:
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"][0]["rules"]
    anchors = _deploy_anchors()
    for rule in rules:
        url = rule["annotations"]["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path == "docs/deploy.md" and anchor == rule["alert"].lower(), url
        assert anchor in anchors, f"{rule['alert']}: no section `### {rule['alert']}` in docs/deploy.md"


def _lag_rule_test(tmp_path: Path, replicas: int, lag: int) -> subprocess.CompletedProcess[str]:
    """`promtool test rules`: `replicas` processes of one group each export the same partition's lag
    (every replica reports the group's figure), from `lag` − 20 growing by one a minute."""
    shutil.copy(MONITORING / "alerts.yml", tmp_path / "alerts.yml")
    series = [
        {
            "series": f'agentstream_consumer_lag{{group="agentstream.delivery",topic="agentstream.events",'
            f'partition="0",instance="delivery-{i}"}}',
            "values": f"{lag - 20}+1x40",
        }
        for i in range(replicas)
    ]
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())["groups"][0]["rules"]
    rule = next(r for r in rules if r["alert"] == "AgentstreamConsumerLagGrowing")
    alert = {
        "exp_labels": {"severity": "warning", "group": "agentstream.delivery", "topic": "agentstream.events"},
        # The figure in the summary is the partition's lag at 30 m, once: (lag − 20) + 30.
        "exp_annotations": {
            "summary": f"agentstream.delivery falls behind on agentstream.events ({lag + 10} records)",
            "description": rule["annotations"]["description"],
            "runbook_url": rule["annotations"]["runbook_url"],
        },
    }
    expected = [alert] if lag > 100 else []
    case = {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "30m", "alertname": "AgentstreamConsumerLagGrowing", "exp_alerts": expected}
                ],
            }
        ],
    }
    (tmp_path / "lag_test.yml").write_text(yaml.safe_dump(case))
    return _promtool("test", "rules", str(tmp_path / "lag_test.yml"))


@pytest.mark.parametrize(("replicas", "lag"), [(1, 150), (3, 60), (3, 150)])
def test_lag_alert_counts_a_partition_once_whatever_the_replicas(tmp_path: Path, replicas: int, lag: int) -> None:
    # Three replicas at 60 each is a lag of 60, not 180: the alert must stay quiet.
    result = _lag_rule_test(tmp_path, replicas, lag)
    assert result.returncode == 0, result.stdout + result.stderr


# -- every alert fires in its condition and stays quiet outside it (`promtool test rules`) ------------


@dataclass(frozen=True)
class AlertCase:
    """Series (at one-minute steps) under which `alert` fires with `labels` at `at`, and
    series alike under which it stays quiet."""

    alert: str
    at: str
    labels: dict[str, str]
    firing: dict[str, str]
    quiet: dict[str, str]


RUNNER_UP = 'up{job="agent-runner",instance="runner-0"}'
DLQ = 'agentstream_dead_letters_total{service="delivery",topic="agentstream.events",reason="invalid_json"}'
CALLS = 'agentstream_delivery_platform_calls_total{platform="telegram",op="edit",outcome="%s"}'
FLUSHES = 'agentstream_persistence_flushes_total{outcome="%s"}'
STARTED = 'agentstream_runs_started_total{connector="default"}'
FINISHED = 'agentstream_runs_finished_total{status="%s",reason="%s"}'
LLM = 'agentstream_llm_calls_total{connector="default",model="gpt",outcome="%s"}'
LAG = 'agentstream_consumer_lag{group="agentstream.delivery",topic="agentstream.events",partition="0"}'
REFUSED = 'agentstream_tool_calls_refused_total{reason="unsigned"}'

ALERT_CASES = [
    AlertCase(
        "AgentstreamRunnerDown",
        "5m",
        {"severity": "critical", "job": "agent-runner", "instance": "runner-0"},
        firing={RUNNER_UP: "1 0x10"},
        quiet={RUNNER_UP: "1x10", 'up{job="ingress",instance="ingress-0"}': "0x10"},
    ),
    AlertCase(
        "AgentstreamRunsLost",
        "8m",
        {"severity": "warning"},
        firing={"agentstream_persistence_lost_runs_total": "0x5 1x10"},
        quiet={"agentstream_persistence_lost_runs_total": "0x15"},
    ),
    AlertCase(
        "AgentstreamConsumerLagGrowing",
        "30m",
        {"severity": "warning", "group": "agentstream.delivery", "topic": "agentstream.events"},
        firing={LAG: "0+10x40"},
        quiet={LAG: "500x40"},  # far behind, but not falling further
    ),
    AlertCase(
        "AgentstreamDeadLetters",
        "15m",
        {"severity": "warning", "service": "delivery", "topic": "agentstream.events", "reason": "invalid_json"},
        firing={DLQ: "0+12x20"},  # 0.2 a second
        quiet={DLQ: "0+3x20"},  # 0.05 a second
    ),
    AlertCase(
        "AgentstreamRateLimitStorm",
        "15m",
        {"severity": "warning", "platform": "telegram"},
        firing={CALLS % "rate_limited": "0+30x20", CALLS % "ok": "0+70x20"},  # 30 %
        quiet={CALLS % "rate_limited": "0+10x20", CALLS % "ok": "0+90x20"},  # 10 %
    ),
    AlertCase(
        "AgentstreamFlushFailing",
        "15m",
        {"severity": "critical"},
        firing={FLUSHES % "error": "0+1x20", FLUSHES % "ok": "0+10x20"},
        quiet={FLUSHES % "error": "0x20", FLUSHES % "dead_letter": "0x20", FLUSHES % "ok": "0+10x20"},
    ),
    AlertCase(
        "AgentstreamNoRunsCompleting",
        "35m",
        {"severity": "critical"},
        firing={STARTED: "0+5x40", FINISHED % ("completed", "none"): "0x40", FINISHED % ("failed", "error"): "0+5x40"},
        quiet={STARTED: "0+5x40", FINISHED % ("completed", "none"): "0+5x40"},
    ),
    AlertCase(
        "AgentstreamConnectorErrors",
        "20m",
        {"severity": "warning", "connector": "default"},
        firing={LLM % "error": "0+2x30", LLM % "ok": "0+8x30"},  # 20 %
        quiet={LLM % "error": "0+1x30", LLM % "ok": "0+19x30"},  # 5 %
    ),
    AlertCase(
        "AgentstreamToolCallsRefused",
        "8m",
        {"severity": "warning", "reason": "unsigned"},
        firing={REFUSED: "0x5 1x10"},  # one refused call is one too many
        quiet={REFUSED: "0x15"},
    ),
]


def test_every_alert_has_a_firing_case() -> None:
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())
    assert {case.alert for case in ALERT_CASES} == {r["alert"] for g in rules["groups"] for r in g["rules"]}


def test_an_idle_stack_raises_no_alert(tmp_path: Path) -> None:
    # Nothing started, nothing finished, every service up: the quietest stack fires nothing.
    idle = {STARTED: "0x40", FINISHED % ("completed", "none"): "0x40", RUNNER_UP: "1x40"}
    tests = [_alert_test(idle, case.alert, "35m", []) for case in ALERT_CASES]
    result = _run_alert_tests(tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr


def _alert_test(series: dict[str, str], alert: str, at: str, expected: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in series.items()],
        "alert_rule_test": [
            {"eval_time": at, "alertname": alert, "exp_alerts": [{"exp_labels": labels} for labels in expected]}
        ],
    }


def _run_alert_tests(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """The rules without their annotations (their texts are not what these cases check)."""
    rules = yaml.safe_load((MONITORING / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    case = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "alerts_test.yml").write_text(yaml.safe_dump(case))
    return _promtool("test", "rules", str(tmp_path / "alerts_test.yml"))


@pytest.mark.parametrize("case", ALERT_CASES, ids=lambda case: case.alert)
def test_each_alert_fires_in_its_condition_and_not_outside_it(tmp_path: Path, case: AlertCase) -> None:
    result = _run_alert_tests(
        tmp_path,
        [
            _alert_test(case.firing, case.alert, case.at, [case.labels]),
            _alert_test(case.quiet, case.alert, case.at, []),
        ],
    )
    assert result.returncode == 0, result.stdout + result.stderr
