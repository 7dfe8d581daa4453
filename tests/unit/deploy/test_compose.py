"""docker-compose.yml: valid against the Compose specification, the services' commands, health and
environment agree with the code, Prometheus and Grafana wired to monitoring/, and the README's
separate-processes sequence matches the Kafka it starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import BaseModel

from agentstream.config import SERVICES, Settings, ShutdownSettings, load_settings
from agentstream.host import STOP_BACKSTOP_S
from agentstream.kafka.flavor import tuning
from tests.unit.deploy.conftest import ROOT, SERVE_ARGS

COMPOSE_SCHEMA = ROOT / "tests" / "data" / "schemas" / "compose-spec.json"
HOST_KAFKA = ROOT / "docker-compose.host-kafka.yml"
INFRASTRUCTURE = {"kafka", "postgres", "init", "prometheus", "grafana"}


def config_key_exists(path: list[str]) -> bool:
    """True when e.g. ["kafka", "bootstrap_servers"] names a field of `Settings`."""
    model: type[BaseModel] = Settings
    for i, part in enumerate(path):
        field = model.model_fields.get(part)
        if field is None:
            return False
        annotation = field.annotation
        if i == len(path) - 1:
            return True
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return True  # a free-form section (dict): deeper keys are data, not fields
        model = annotation
    return True


REQUIRED_VALUE = "operator-set"


def interpolate(value: str) -> str:
    """Compose's `${VAR:-default}` with nothing set in the environment, and `${VAR:?message}` (a
    variable compose refuses to start without) as if the operator set it."""
    value = re.sub(r"\$\{[A-Z_]+:\?[^}]*\}", REQUIRED_VALUE, value)
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def check_jsonschema(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--schemafile", str(COMPOSE_SCHEMA), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.timeout(60)  # check-jsonschema runs as its own interpreter, twice
def test_compose_files_follow_the_compose_specification(tmp_path: Path) -> None:
    result = check_jsonschema(ROOT / "docker-compose.yml", HOST_KAFKA)
    assert result.returncode == 0, result.stdout + result.stderr
    # The schema is strict enough to catch a misspelt key.
    bad = tmp_path / "compose.yml"
    bad.write_text("services:\n  kafka:\n    image: apache/kafka:4.4.0\n    helthcheck: {}\n")
    result = check_jsonschema(bad)
    assert result.returncode != 0 and "helthcheck" in result.stdout


# -- docker-compose.yml -------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_infrastructure_init_and_every_service(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {*INFRASTRUCTURE, *SERVICES}
    assert compose["services"]["kafka"]["image"].startswith("apache/kafka:")
    assert compose["services"]["postgres"]["image"] == "postgres:16"


@pytest.mark.parametrize("service", SERVICES)
def test_compose_service_serves_itself_with_a_healthcheck(compose: dict[str, Any], service: str) -> None:
    spec = compose["services"][service]
    assert "entrypoint" not in spec, "the image entrypoint `agentstream` must stay"
    assert spec["command"] == ["serve", service, *SERVE_ARGS]
    assert spec["depends_on"] == {"init": {"condition": "service_completed_successfully"}}
    check = " ".join(spec["healthcheck"]["test"])
    assert "http://127.0.0.1:8080/readyz" in check, "healthy means ready (broker, topics, database)"
    drain_and_stop = ShutdownSettings().grace_s + STOP_BACKSTOP_S + 3
    assert _seconds(spec["stop_grace_period"]) >= drain_and_stop, "a drain and a stop must end before SIGKILL"
    assert spec["image"] == compose["services"]["init"]["image"]


def test_compose_init_creates_topics_then_migrates(compose: dict[str, Any]) -> None:
    init = compose["services"]["init"]
    script = " ".join(init["command"])
    assert script.index("agentstream topics create") < script.index("agentstream db upgrade")
    assert "&&" in script, "a failed topic creation must fail the init service"
    assert init["depends_on"] == {
        "kafka": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
    }


def test_compose_environment_is_real_config(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    env = {k: interpolate(str(v)) for k, v in compose["services"]["init"]["environment"].items()}
    for service in SERVICES:
        assert compose["services"][service]["environment"] == compose["services"]["init"]["environment"]
    # besides config keys, only the variables that a `*_env` key names (the secrets themselves)
    secrets = {v for k, v in env.items() if k.endswith("_ENV")}
    for key, value in env.items():
        if key in secrets:
            monkeypatch.setenv(key, value)
            continue
        assert key.startswith("AGENTSTREAM__"), key
        assert config_key_exists(key.removeprefix("AGENTSTREAM__").lower().split("__")), f"{key} is not a config key"
        monkeypatch.setenv(key, value)

    settings = load_settings()
    assert settings.kafka.bootstrap_servers == "kafka:9092"
    assert settings.kafka.in_memory is False
    assert tuning(settings.kafka).idempotent is True
    assert settings.http.host == "0.0.0.0"
    assert settings.database.url.startswith("postgresql+psycopg://")
    # delivery's web page forwards posts to ingress by its compose name, not its own loopback
    assert settings.platforms["web"].api_url == f"http://ingress:{_serve_port(compose, 'ingress')}"
    # credentials come from variables the operator sets; unset ones are empty and never accepted
    assert settings.auth.admin_token_env and settings.auth.metrics_token_env and settings.auth.web.secret_env
    assert settings.platforms["web"].api_key_env


def _serve_port(compose: dict[str, Any], service: str) -> str:
    command = compose["services"][service]["command"]
    return str(command[command.index("--port") + 1])


def test_compose_has_no_default_password() -> None:
    """A password compose would fill in by itself is a password every installation shares."""
    text = (ROOT / "docker-compose.yml").read_text()
    for variable in ("POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD"):
        uses = re.findall(r"\$\{" + variable + r"(:[-?])", text)
        assert uses and set(uses) == {":?"}, f"{variable} must be required (`${{{variable}:?…}}`), not defaulted"
    assert not re.search(r"\$\{[A-Z_]*(PASSWORD|SECRET)[A-Z_]*:-[^}]+\}", text)


@pytest.mark.parametrize("service", [*SERVICES, "init"])
def test_compose_agentstream_containers_are_locked_down(compose: dict[str, Any], service: str) -> None:
    spec = compose["services"][service]
    assert spec["cap_drop"] == ["ALL"] and "cap_add" not in spec
    assert spec["read_only"] is True and spec["tmpfs"] == ["/tmp"]
    assert "no-new-privileges:true" in spec["security_opt"]
    limits = spec["deploy"]["resources"]["limits"]
    assert float(limits["cpus"]) > 0 and limits["memory"] and spec["pids_limit"] > 0


def test_compose_publishes_nothing_beyond_loopback(compose: dict[str, Any]) -> None:
    assert "ports" not in compose["services"]["kafka"], "Kafka (plaintext) must stay on the compose network"
    published = {name: spec.get("ports", []) for name, spec in compose["services"].items()}
    assert any(published.values())
    for name, ports in published.items():
        for port in ports:
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), f"{name} publishes {port!r}"
    assert published["ingress"] == ["127.0.0.1:8181:8080"]


def test_compose_endpoints_match_infrastructure(compose: dict[str, Any]) -> None:
    env = {k: interpolate(str(v)) for k, v in compose["services"]["init"]["environment"].items()}
    kafka = compose["services"]["kafka"]["environment"]
    assert f"//{env['AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS']}" in kafka["KAFKA_ADVERTISED_LISTENERS"]
    assert kafka["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    pg = {k: interpolate(str(v)) for k, v in compose["services"]["postgres"]["environment"].items()}
    url = urlsplit(env["AGENTSTREAM__DATABASE__URL"])
    assert (url.hostname, url.username, url.password, url.path) == (
        "postgres",
        pg["POSTGRES_USER"],
        pg["POSTGRES_PASSWORD"],
        f"/{pg['POSTGRES_DB']}",
    )


def test_compose_kafka_runs_kraft_without_zookeeper(compose: dict[str, Any]) -> None:
    kafka = compose["services"]["kafka"]["environment"]
    assert set(kafka["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{kafka['KAFKA_NODE_ID']}@kafka:9093"
    assert kafka["KAFKA_CONTROLLER_LISTENER_NAMES"] in kafka["KAFKA_LISTENERS"]
    assert not any("ZOOKEEPER" in key for key in kafka)
    assert not any("zookeeper" in name for name in compose["services"])


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, duration
    return float(match[1])


# -- Prometheus and Grafana ---------------------------------------------------------------------


def _mounts(spec: dict[str, Any]) -> dict[str, str]:
    """Container path → host path (relative to the compose file) of bind mounts."""
    mounts = {}
    for volume in spec.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            mounts[target] = source
    return mounts


def test_compose_prometheus_loads_the_monitoring_config_and_rules(compose: dict[str, Any]) -> None:
    prometheus = compose["services"]["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:v3")
    mounts = _mounts(prometheus)
    config = next(arg.split("=", 1)[1] for arg in prometheus["command"] if arg.startswith("--config.file="))
    assert mounts[config] == "./monitoring/prometheus.yml"
    assert "./monitoring/alerts.yml" in mounts.values()
    # The scrape token reaches Prometheus as a file (a secret), never in its config.
    assert prometheus["secrets"] == ["metrics_token"]
    assert compose["secrets"]["metrics_token"] == {"environment": "AGENTSTREAM_METRICS_TOKEN"}
    assert (
        compose["services"]["init"]["environment"]["AGENTSTREAM__AUTH__METRICS_TOKEN_ENV"]
        == "AGENTSTREAM_METRICS_TOKEN"
    )


def test_compose_grafana_provisions_the_dashboard(compose: dict[str, Any]) -> None:
    grafana = compose["services"]["grafana"]
    mounts = _mounts(grafana)
    assert mounts["/etc/grafana/provisioning"] == "./monitoring/grafana/provisioning"
    dashboards = next(target for target, source in mounts.items() if source == "./monitoring/grafana/dashboards")
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{dashboards}/agentstream-overview.json"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert grafana["depends_on"] == {"prometheus": {"condition": "service_healthy"}}


MONITORING = ROOT / "monitoring"


def test_compose_prometheus_config_scrapes_every_service_with_the_token(compose: dict[str, Any]) -> None:
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    assert "alerts.yml" in [Path(f).name for f in config.get("rule_files", [])]
    targets = {
        target
        for job in config["scrape_configs"]
        if job.get("authorization", {}).get("credentials_file") == "/run/secrets/metrics_token"
        for static in job.get("static_configs", [])
        for target in static["targets"]
    }
    assert {f"{service}:8080" for service in SERVICES} <= targets


def test_compose_grafana_provisioning_points_at_compose_paths(compose: dict[str, Any]) -> None:
    mounts = _mounts(compose["services"]["grafana"])
    dashboards = next(target for target, source in mounts.items() if source == "./monitoring/grafana/dashboards")
    provisioning = MONITORING / "grafana" / "provisioning"
    providers = [
        p
        for f in sorted((provisioning / "dashboards").glob("*.y*ml"))
        for p in yaml.safe_load(f.read_text())["providers"]
    ]
    assert any(p["options"]["path"] == dashboards for p in providers)
    sources = [
        d
        for f in sorted((provisioning / "datasources").glob("*.y*ml"))
        for d in yaml.safe_load(f.read_text())["datasources"]
    ]
    assert any(urlsplit(d["url"]).hostname == "prometheus" for d in sources if d["type"] == "prometheus")


# -- the README's separate processes against compose's Kafka --------------------------------------


def _readme_block() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Run the services as separate processes") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block
    return block[1].splitlines()


def test_readme_separate_processes_use_compose_kafka(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _readme_block()
    assert lines[0] == "docker compose -f docker-compose.yml -f docker-compose.host-kafka.yml up -d --wait kafka"
    exported = dict(part.split("=", 1) for line in lines if line.startswith("export ") for part in line.split()[1:])
    for key, value in exported.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    # The host reaches Kafka on the EXTERNAL listener, which the override publishes on loopback only.
    host, port = settings.kafka.bootstrap_servers.split(":")
    kafka = compose["services"]["kafka"]["environment"]
    assert f"EXTERNAL://{host}:{port}" in kafka["KAFKA_ADVERTISED_LISTENERS"].split(",")
    override = yaml.safe_load(HOST_KAFKA.read_text())
    assert override["services"]["kafka"]["ports"] == [f"127.0.0.1:{port}:{port}"]
    # Then exactly the CLI's own sequence: topics, migrations, the five services, a message.
    commands = [line.split("#")[0].strip() for line in lines if line.lstrip().startswith("uv run agentstream")]
    assert commands[:2] == ["uv run agentstream topics create", "uv run agentstream db upgrade"]
    assert "uv run agentstream serve $s &" in commands
    loop = next(line for line in lines if line.startswith("for s in"))
    assert loop.split(" in ")[1].split(";")[0].split() == list(SERVICES)
    assert commands[-1].startswith("uv run agentstream send ")
