"""The k8s base: every resource parses, validates and agrees with the code (the CLI contract,
the ops endpoints, the configuration keys, the stop time) and with the sizing in docs/deploy.md.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from agentstream.config import SERVICES, load_settings
from agentstream.host import STOP_BACKSTOP_S
from agentstream.kafka.flavor import tuning
from tests.unit.deploy.conftest import BASE, ROOT, SERVE_ARGS, Manifests, crd_errors, rendered


def test_every_k8s_yaml_parses_and_is_listed(kustomization: dict[str, Any]) -> None:
    listed = set(kustomization["resources"]) | {
        f["files"][0].split("=")[-1] for f in kustomization["configMapGenerator"]
    }
    on_disk = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == listed
    for path in BASE.glob("*.yaml"):
        assert list(yaml.safe_load_all(path.read_text())), path


def _container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec["containers"]
    return container


@pytest.mark.parametrize("service", SERVICES)
def test_k8s_deployment_serves_itself_with_probes(manifests: Manifests, service: str) -> None:
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
def test_k8s_pods_read_the_generated_config(manifests: Manifests, kustomization: dict[str, Any], service: str) -> None:
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
    settings = load_settings(BASE / source)
    assert settings.kafka.in_memory is False
    assert tuning(settings.kafka).idempotent is True
    assert settings.http.host == "0.0.0.0"


def test_k8s_init_job_creates_topics_then_migrates(manifests: Manifests) -> None:
    spec = manifests[("Job", "agentstream-init")]["spec"]["template"]["spec"]
    steps = [c["command"] + c["args"] for c in spec["initContainers"] + spec["containers"]]
    assert steps == [["agentstream", "topics", "create"], ["agentstream", "db", "upgrade"]]


KINDS = (
    ["ConfigMap", "Job", "Ingress", "ServiceMonitor"]
    + ["Deployment", "Service", "PodDisruptionBudget"] * len(SERVICES)
    + ["NetworkPolicy"] * 7
    # Generated from monitoring/alerts.yml once that exists (test_prometheus_rule.py checks it is).
    + (["PrometheusRule"] if (BASE / "prometheus-rule.yaml").exists() else [])
)
# The oldest Kubernetes release the base supports, and the newest schema kubernetes-validate has.
K8S_VERSIONS = ["1.28", kubernetes_validate.latest_version()]
# API groups of the custom resources (their schemas are vendored under tests/data/crds/).
CRD_GROUPS = {"monitoring.coreos.com", "keda.sh", "kafka.strimzi.io"}


def validate(doc: dict[str, Any], version: str) -> None:
    """Kubernetes' own kinds by kubernetes-validate (strict), custom resources by their CRD schema."""
    if doc["apiVersion"].split("/")[0] in CRD_GROUPS:
        errors = crd_errors(doc)
        assert not errors, f"{doc['kind']}/{doc['metadata']['name']}: {errors}"
        return
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as err:
        pytest.fail(f"{doc['kind']}/{doc['metadata']['name']} is invalid for Kubernetes {version}: {err.message}")


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_base_builds_and_validates(version: str) -> None:
    docs = rendered("base")
    assert sorted(doc["kind"] for doc in docs) == sorted(KINDS)
    for doc in docs:
        validate(doc, version)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_every_resource_passes_kubernetes_validate(manifests: Manifests, version: str) -> None:
    """Strict schemas (unknown fields are errors), without needing kustomize."""
    assert sorted(kind for kind, _ in manifests) == sorted(k for k in KINDS if k != "ConfigMap")
    for doc in manifests.values():
        validate(doc, version)


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


def test_k8s_config_is_closed_and_uses_a_real_model(kustomization: dict[str, Any], manifests: Manifests) -> None:
    source = kustomization["configMapGenerator"][0]["files"][0].split("=")[-1]
    settings = load_settings(BASE / source)
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


# -- sizing, disruption, termination, scraping --------------------------------------------------------


def sizing_table() -> dict[str, dict[str, str]]:
    """docs/deploy.md's "Sizing" table: service → CPU request, memory request, memory limit."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text[text.index("### Sizing") :]
    rows = re.findall(r"^\| `([a-z-]+)` \| `([^`]+)` \| `([^`]+)` \| `([^`]+)` \|", section, re.M)
    return {svc: {"cpu": cpu, "memory": mem, "limit": limit} for svc, cpu, mem, limit in rows}


def test_k8s_resources_match_the_documented_sizing(manifests: Manifests) -> None:
    table = sizing_table()
    assert set(table) == set(SERVICES)
    for service in SERVICES:
        spec = manifests[("Deployment", f"agentstream-{service}")]["spec"]["template"]["spec"]
        documented = table[service]
        assert _container(spec)["resources"] == {
            "requests": {"cpu": documented["cpu"], "memory": documented["memory"]},
            "limits": {"memory": documented["limit"]},
        }, service
    # One runner process uses one core (docs/deploy.md: ~7,500 streamed tokens/s per core).
    assert table["agent-runner"]["cpu"] == "1"


def _pre_stop_s(container: dict[str, Any]) -> int:
    """Seconds a container's preStop sleeps (0 without one): they count against the pod's grace."""
    pre_stop = container.get("lifecycle", {}).get("preStop")
    if pre_stop is None:
        return 0
    command = pre_stop["exec"]["command"]
    assert command[0] == "sleep", command  # the only hook the base uses: a wait, nothing else
    return int(command[1])


@pytest.mark.parametrize("service", SERVICES)
def test_k8s_termination_outlasts_the_drain_and_the_stop(
    manifests: Manifests, kustomization: dict[str, Any], service: str
) -> None:
    spec = manifests[("Deployment", f"agentstream-{service}")]["spec"]["template"]["spec"]
    source = kustomization["configMapGenerator"][0]["files"][0].split("=")[-1]
    grace_s = load_settings(BASE / source).shutdown.grace_s
    # preStop, then the drain (shutdown.grace_s), then the stop: the host abandons services after
    # STOP_BACKSTOP_S; uvicorn and the process exit need a little more. SIGKILL cuts none of it.
    needed = _pre_stop_s(_container(spec)) + math.ceil(grace_s) + math.ceil(STOP_BACKSTOP_S) + 3
    assert needed <= spec["terminationGracePeriodSeconds"] <= needed + 10


@pytest.mark.parametrize("service", ["ingress", "delivery"])
def test_k8s_http_front_doors_leave_the_endpoints_before_they_stop(manifests: Manifests, service: str) -> None:
    spec = manifests[("Deployment", f"agentstream-{service}")]["spec"]["template"]["spec"]
    assert _pre_stop_s(_container(spec)) >= 3  # the endpoints update takes a moment after the pod is terminating


@pytest.mark.parametrize("service", SERVICES)
def test_k8s_every_service_has_a_disruption_budget(manifests: Manifests, service: str) -> None:
    pdb = manifests[("PodDisruptionBudget", f"agentstream-{service}")]
    labels = manifests[("Deployment", f"agentstream-{service}")]["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"] == labels
    # maxUnavailable, not minAvailable: a single replica must not block node drains.
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": pdb["spec"]["selector"]}


def test_k8s_lag_scaled_deployments_leave_replicas_to_keda(manifests: Manifests) -> None:
    for service in ("ingress", "agent-runner", "delivery"):
        assert "replicas" not in manifests[("Deployment", f"agentstream-{service}")]["spec"], service


def test_k8s_service_monitor_scrapes_every_service_with_the_token(manifests: Manifests) -> None:
    monitor = manifests[("ServiceMonitor", "agentstream")]
    selector = monitor["spec"]["selector"]
    for service in SERVICES:
        svc = manifests[("Service", f"agentstream-{service}")]
        assert selector["matchLabels"].items() <= svc["metadata"]["labels"].items()
        assert svc["spec"]["ports"][0]["name"] == "http"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    env = _container(manifests[("Deployment", "agentstream-ingress")]["spec"]["template"]["spec"])["env"]
    secret = next(e for e in env if e["name"] == "METRICS_TOKEN")["valueFrom"]["secretKeyRef"]
    assert endpoint["authorization"]["credentials"] == {"name": secret["name"], "key": secret["key"]}


def test_crd_schemas_catch_a_misspelt_field(manifests: Manifests) -> None:
    monitor = manifests[("ServiceMonitor", "agentstream")]
    bad = {**monitor, "spec": {**monitor["spec"], "endpoint": monitor["spec"]["endpoints"]}}
    assert any("endpoint" in e for e in crd_errors(bad))


def test_k8s_service_monitor_names_jobs_as_compose_prometheus_and_the_alerts_do(manifests: Manifests) -> None:
    monitor = manifests[("ServiceMonitor", "agentstream")]
    job_label = monitor["spec"]["jobLabel"]
    k8s_jobs = {manifests[("Service", f"agentstream-{s}")]["metadata"]["labels"][job_label] for s in SERVICES}
    compose = yaml.safe_load((ROOT / "monitoring" / "prometheus.yml").read_text())
    assert k8s_jobs == {job["job_name"] for job in compose["scrape_configs"]}
    rules = yaml.safe_load((ROOT / "monitoring" / "alerts.yml").read_text())
    alert_jobs = {
        m for group in rules["groups"] for rule in group["rules"] for m in re.findall(r'job="([^"]+)"', rule["expr"])
    }
    assert alert_jobs and alert_jobs <= k8s_jobs
