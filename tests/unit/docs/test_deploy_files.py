"""The deployment files parse and agree with the code.

No Docker engine or cluster is needed: docker-compose.yml and every k8s manifest are
parsed as YAML and checked against the CLI contract (`agentstream serve <service>`),
the ops endpoints and the real configuration keys (loaded with `load_settings`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml
from pydantic import BaseModel

from agentstream.config import SERVICES, Settings, load_settings
from agentstream.kafka.flavor import tuning

ROOT = Path(__file__).resolve().parents[3]
SERVE_ARGS = ["--host", "0.0.0.0", "--port", "8080"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets may reach `load_settings`."""
    for name in list(os.environ):
        if name.startswith("AGENTSTREAM"):
            monkeypatch.delenv(name)


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


def interpolate(value: str) -> str:
    """Compose's `${VAR:-default}` with nothing set in the environment."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


# -- docker-compose.yml -------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_has_infrastructure_init_and_every_service(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"kafka", "postgres", "init", *SERVICES}
    assert compose["services"]["kafka"]["image"].startswith("apache/kafka:")
    assert compose["services"]["postgres"]["image"] == "postgres:16"


@pytest.mark.parametrize("service", SERVICES)
def test_compose_service_serves_itself_with_a_healthcheck(compose: dict[str, Any], service: str) -> None:
    spec = compose["services"][service]
    assert "entrypoint" not in spec, "the image entrypoint `agentstream` must stay"
    assert spec["command"] == ["serve", service, *SERVE_ARGS]
    assert spec["depends_on"] == {"init": {"condition": "service_completed_successfully"}}
    check = " ".join(spec["healthcheck"]["test"])
    assert "http://127.0.0.1:8080/healthz" in check
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
    assert settings.kafka.embedded is False
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


# -- Dockerfile ---------------------------------------------------------------------


def test_dockerfile_builds_one_image_from_the_lock_file() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    assert "uv sync --frozen --no-dev" in text
    assert 'ENTRYPOINT ["agentstream"]' in text
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    members = [p for pattern in root["tool"]["uv"]["workspace"]["members"] for p in sorted(ROOT.glob(pattern))]
    assert members
    for member in members:
        manifest = (member / "pyproject.toml").relative_to(ROOT).as_posix()
        assert f"COPY {manifest} {manifest}" in text, f"Dockerfile does not copy {manifest}"


def test_dockerignore_keeps_what_the_build_needs() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    for needed in ("pyproject.toml", "uv.lock", "libs/", "services/"):
        assert f"!{needed}" in lines


# -- k8s/ ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "k8s" / "kustomization.yaml").read_text())


@pytest.fixture(scope="module")
def manifests(kustomization: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    docs: dict[tuple[str, str], dict[str, Any]] = {}
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((ROOT / "k8s" / resource).read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def test_every_k8s_yaml_parses_and_is_listed(kustomization: dict[str, Any]) -> None:
    listed = set(kustomization["resources"]) | {
        f["files"][0].split("=")[-1] for f in kustomization["configMapGenerator"]
    }
    on_disk = {p.name for p in (ROOT / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == listed
    for path in (ROOT / "k8s").glob("*.yaml"):
        assert list(yaml.safe_load_all(path.read_text())), path


def _container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec["containers"]
    return container


@pytest.mark.parametrize("service", SERVICES)
def test_k8s_deployment_serves_itself_with_probes(
    manifests: dict[tuple[str, str], dict[str, Any]], service: str
) -> None:
    deployment = manifests[("Deployment", f"agentstream-{service}")]
    template = deployment["spec"]["template"]
    container = _container(template["spec"])
    assert container["command"] + container["args"] == ["agentstream", "serve", service, *SERVE_ARGS]
    assert container["ports"] == [{"name": "http", "containerPort": 8080}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert template["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8080",
        "prometheus.io/path": "/metrics",
    }
    labels = template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()

    svc = manifests[("Service", f"agentstream-{service}")]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize("service", SERVICES)
def test_k8s_pods_read_the_generated_config(
    manifests: dict[tuple[str, str], dict[str, Any]], kustomization: dict[str, Any], service: str
) -> None:
    spec = manifests[("Deployment", f"agentstream-{service}")]["spec"]["template"]["spec"]
    container = _container(spec)
    env = {e["name"]: e for e in container["env"]}
    config_path = Path(env["AGENTSTREAM_CONFIG"]["value"])
    mount = next(m for m in container["volumeMounts"] if Path(m["mountPath"]) == config_path.parent)
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    generator = kustomization["configMapGenerator"][0]
    assert volume["configMap"]["name"] == generator["name"]
    assert f"{config_path.name}=" in generator["files"][0]
    assert env["AGENTSTREAM__DATABASE__URL"]["valueFrom"]["secretKeyRef"]["key"] == "url"


def test_k8s_config_file_is_valid_settings(kustomization: dict[str, Any]) -> None:
    source = kustomization["configMapGenerator"][0]["files"][0].split("=")[-1]
    settings = load_settings(ROOT / "k8s" / source)
    assert settings.kafka.embedded is False
    assert tuning(settings.kafka).idempotent is True
    assert settings.http.host == "0.0.0.0"


def test_k8s_init_job_creates_topics_then_migrates(manifests: dict[tuple[str, str], dict[str, Any]]) -> None:
    spec = manifests[("Job", "agentstream-init")]["spec"]["template"]["spec"]
    steps = [c["command"] + c["args"] for c in spec["initContainers"] + spec["containers"]]
    assert steps == [["agentstream", "topics", "create"], ["agentstream", "db", "upgrade"]]


KINDS = ["ConfigMap", "Job", "Ingress"] + ["Deployment", "Service"] * len(SERVICES) + ["NetworkPolicy"] * 7
# The oldest Kubernetes release the base supports, and the newest schema kubernetes-validate has.
K8S_VERSIONS = ["1.28", kubernetes_validate.latest_version()]


def _kustomize() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    return ["kubectl", "kustomize"] if shutil.which("kubectl") else None


@pytest.mark.skipif(_kustomize() is None, reason="neither kustomize nor kubectl installed")
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_kustomize_builds_and_validates(version: str) -> None:
    cmd = _kustomize()
    assert cmd is not None
    out = subprocess.run([*cmd, str(ROOT / "k8s")], capture_output=True, text=True, timeout=60, check=True).stdout
    docs = list(yaml.safe_load_all(out))
    assert sorted(doc["kind"] for doc in docs) == sorted(KINDS)
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_every_resource_passes_kubernetes_validate(
    manifests: dict[tuple[str, str], dict[str, Any]], version: str
) -> None:
    """Strict schemas (unknown fields are errors), without needing kustomize."""
    assert sorted(kind for kind, _ in manifests) == sorted(k for k in KINDS if k != "ConfigMap")
    for (kind, name), doc in manifests.items():
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            pytest.fail(f"{kind}/{name} is invalid for Kubernetes {version}: {err.message}")


def test_kubernetes_validate_catches_a_bad_network_policy() -> None:
    bad = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "x"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"form": []}]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSIONS[0], strict=True)


# -- k8s/ configuration: closed and without the demo model --------------------------------------


def test_k8s_config_is_closed_and_uses_a_real_model(
    kustomization: dict[str, Any], manifests: dict[tuple[str, str], dict[str, Any]]
) -> None:
    source = kustomization["configMapGenerator"][0]["files"][0].split("=")[-1]
    settings = load_settings(ROOT / "k8s" / source)
    assert settings.authz.default.allow_all is False
    assert all(rule.allow_all is False for rule in settings.authz.platforms.values())
    assert settings.connectors, "without a connector agent-runner is never ready"
    assert all(c.type != "scripted" for c in settings.connectors)
    (model,) = settings.connectors
    assert model.type == "openai" and model.base_url and model.model and model.api_key_env
    assert settings.default_connector == model.id
    # The key comes from a Secret the operator creates; no Secret (value) is committed.
    assert not any(kind == "Secret" for kind, _ in manifests)
    container = _container(manifests[("Deployment", "agentstream-agent-runner")]["spec"]["template"]["spec"])
    env = {e["name"]: e for e in container["env"]}
    assert "value" not in env[model.api_key_env]
    assert env[model.api_key_env]["valueFrom"]["secretKeyRef"] == {"name": "agentstream-model", "key": "api-key"}
