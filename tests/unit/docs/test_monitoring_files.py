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

ROOT = Path(__file__).resolve().parents[3]
MONITORING = ROOT / "monitoring"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian's `prometheus` package; .ci/run installs it)"
)

SECRET_FILE = "/run/secrets/metrics_token"  # compose's secret `metrics_token`


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=30, check=False)


@needs_promtool
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


@needs_promtool
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
