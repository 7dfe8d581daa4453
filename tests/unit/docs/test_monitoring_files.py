"""monitoring/: promtool accepts the Prometheus configuration and the alert rules; the dashboard
and the Grafana provisioning agree on the data source."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from agentstream.config import SERVICES
from agentstream.testing.commands import command_path

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
    assert "8 rules found" in result.stdout + result.stderr


def test_one_scrape_job_per_service() -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    assert [job["job_name"] for job in config["scrape_configs"]] == list(SERVICES)
    assert all(job["authorization"]["credentials_file"] == SECRET_FILE for job in config["scrape_configs"])


def test_every_panel_reads_the_provisioned_data_source() -> None:
    source = yaml.safe_load((MONITORING / "grafana/provisioning/datasources/prometheus.yml").read_text())
    uid = source["datasources"][0]["uid"]
    dashboard = json.loads((MONITORING / "grafana/dashboards/agentstream-overview.json").read_text())
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels and all(p["datasource"]["uid"] == uid for p in panels)
    assert all(p["targets"] and all(t["expr"] for t in p["targets"]) for p in panels)
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


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
