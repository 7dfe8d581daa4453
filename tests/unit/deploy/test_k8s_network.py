"""The k8s NetworkPolicies and Ingress allow exactly the flows the services need.

A small evaluator of the policies, flow by flow, over the manifests `kustomize` would render
(the manifests themselves are checked in test_k8s_base.py).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI

from agentstream.auth import WebSessions
from agentstream.config import SERVICES, load_settings
from agentstream.config.auth import WebSessionSettings
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.adapters.web_http import add_web_routes
from tests.unit.deploy.conftest import BASE, ROOT

# -- k8s/ NetworkPolicies: a small evaluator of the policies, flow by flow -----------------------

Labels = dict[str, str]
NAMESPACE: Labels = {"kubernetes.io/metadata.name": "agentstream"}
KUBE_SYSTEM: Labels = {"kubernetes.io/metadata.name": "kube-system"}
MONITORING: Labels = {"kubernetes.io/metadata.name": "monitoring"}
INGRESS_NGINX: Labels = {"kubernetes.io/metadata.name": "ingress-nginx"}
OTHER: Labels = {"kubernetes.io/metadata.name": "someone-else"}


def selects(selector: dict[str, Any], labels: Labels) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def peer_matches(peer: dict[str, Any], other: dict[str, Any]) -> bool:
    """`other` is {"ip": ...} (outside the cluster) or {"pod": labels, "ns": namespace labels}."""
    if "ipBlock" in peer:
        if "ip" not in other:
            return False
        ip = ipaddress.ip_address(other["ip"])
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(e) for e in block.get("except", [])
        )
    if "ip" in other:
        return False
    # A podSelector alone means this namespace.
    ns_ok = selects(peer["namespaceSelector"], other["ns"]) if "namespaceSelector" in peer else other["ns"] == NAMESPACE
    return ns_ok and selects(peer.get("podSelector", {}), other["pod"])


def rule_allows(rule: dict[str, Any], peers_key: str, other: dict[str, Any], port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    port_ok = ports is None or any(p.get("protocol", "TCP") == protocol and p["port"] == port for p in ports)
    peers = rule.get(peers_key)
    return port_ok and (peers is None or any(peer_matches(p, other) for p in peers))


def allowed(
    policies: list[dict[str, Any]], direction: str, pod: Labels, other: dict[str, Any], port: int, protocol: str = "TCP"
) -> bool:
    """Whether `pod` may send to (Egress) / receive from (Ingress) `other` on `port`."""
    rules_key, peers_key = ("egress", "to") if direction == "Egress" else ("ingress", "from")
    applying = [
        p["spec"] for p in policies if selects(p["spec"]["podSelector"], pod) and direction in p["spec"]["policyTypes"]
    ]
    if not applying:
        return True  # not isolated (never the case here: see the default-deny test)
    return any(rule_allows(r, peers_key, other, port, protocol) for spec in applying for r in spec.get(rules_key, []))


def flow(policies: list[dict[str, Any]], src: Labels, dst: Labels, port: int, protocol: str = "TCP") -> bool:
    """Pod to pod inside this namespace: the sender's egress and the receiver's ingress."""
    return allowed(policies, "Egress", src, {"pod": dst, "ns": NAMESPACE}, port, protocol) and allowed(
        policies, "Ingress", dst, {"pod": src, "ns": NAMESPACE}, port, protocol
    )


@pytest.fixture(scope="module")
def policies(manifests: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    return [doc for (kind, _), doc in manifests.items() if kind == "NetworkPolicy"]


@pytest.fixture(scope="module")
def pods(manifests: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Labels]:
    """Pod labels of every workload: the five services and `init`."""
    out = {}
    for (kind, _), doc in manifests.items():
        if kind in ("Deployment", "Job"):
            labels = doc["spec"]["template"]["metadata"]["labels"]
            out[labels["app.kubernetes.io/component"]] = labels
    assert set(out) == {*SERVICES, "init"}
    return out


def test_k8s_default_deny_covers_every_pod(policies: list[dict[str, Any]], pods: dict[str, Labels]) -> None:
    deny = [
        p["spec"]
        for p in policies
        if set(p["spec"]["policyTypes"]) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert deny, "no default-deny NetworkPolicy (both directions, no rules)"
    for name, labels in pods.items():
        assert any(selects(spec["podSelector"], labels) for spec in deny), f"{name} pods are not under default deny"


MODEL_API = "104.18.7.192"  # a public address (api.openai.com lives on such)
PRIVATE = ["10.0.0.7", "172.20.1.1", "192.168.1.1", "169.254.169.254", "100.64.0.10"]
DNS_POD = {"pod": {"k8s-app": "kube-dns"}, "ns": KUBE_SYSTEM}
INFRA_POD = {"pod": {"app": "kafka-or-postgres"}, "ns": NAMESPACE}


def test_k8s_every_pod_reaches_dns_kafka_and_postgres_only(
    policies: list[dict[str, Any]], pods: dict[str, Labels]
) -> None:
    for name, labels in pods.items():
        assert allowed(policies, "Egress", labels, DNS_POD, 53, "UDP"), name
        assert allowed(policies, "Egress", labels, DNS_POD, 53, "TCP"), name
        assert allowed(policies, "Egress", labels, INFRA_POD, 9092), name
        assert allowed(policies, "Egress", labels, INFRA_POD, 5432), name
        assert not allowed(policies, "Egress", labels, INFRA_POD, 6379), name  # nothing else
        assert not allowed(policies, "Egress", labels, {"ip": MODEL_API}, 80), name


def test_k8s_egress_to_the_internet(policies: list[dict[str, Any]], pods: dict[str, Labels]) -> None:
    out = {name for name, labels in pods.items() if allowed(policies, "Egress", labels, {"ip": MODEL_API}, 443)}
    assert out == {"agent-runner", "delivery"}  # the model provider; the chat platforms' APIs
    for name in out:
        for ip in PRIVATE:  # never the cluster's own ranges or the cloud metadata endpoint
            assert not allowed(policies, "Egress", pods[name], {"ip": ip}, 443), (name, ip)


def test_k8s_flows_between_services(policies: list[dict[str, Any]], pods: dict[str, Labels]) -> None:
    allowed_flows = {("delivery", "ingress")}  # the web page forwards posts to ingress
    for src in pods:
        for dst in pods:
            if src != dst:
                assert flow(policies, pods[src], pods[dst], 8080) == ((src, dst) in allowed_flows), (src, dst)


def test_k8s_who_reaches_the_http_ports(policies: list[dict[str, Any]], pods: dict[str, Labels]) -> None:
    def reachable_from(ns: Labels) -> set[str]:
        other = {"pod": {"app.kubernetes.io/name": "controller-or-prometheus"}, "ns": ns}
        return {name for name, labels in pods.items() if allowed(policies, "Ingress", labels, other, 8080)}

    assert reachable_from(INGRESS_NGINX) == {"ingress", "delivery"}  # webhooks, /v1/messages; the web chat
    assert reachable_from(MONITORING) == set(SERVICES)  # /metrics of every service
    assert reachable_from(OTHER) == set()
    assert reachable_from(NAMESPACE) == set()  # any other pod of this namespace (delivery → ingress: above)


def test_k8s_the_web_page_forwards_to_the_ingress_service(
    kustomization: dict[str, Any], manifests: dict[tuple[str, str], dict[str, Any]]
) -> None:
    settings = load_settings(BASE / kustomization["configMapGenerator"][0]["files"][0].split("=")[-1])
    url = urlsplit(settings.platforms["web"].api_url or "")
    service = manifests[("Service", url.hostname or "")]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "ingress"
    assert url.port == service["spec"]["ports"][0]["port"]


# -- k8s/ Ingress -------------------------------------------------------------------------------


def _routes() -> dict[str, list[str]]:
    """The HTTP paths each public service really serves (ingress: its OpenAPI document)."""
    ingress = list(json.loads((ROOT / "docs" / "openapi-ingress.json").read_text())["paths"])
    app = FastAPI()
    add_web_routes(app, WebAdapter(), WebSessions(WebSessionSettings()), "http://ingress", None)
    delivery = [route.path for route in app.routes if hasattr(route, "methods")]
    return {"agentstream-ingress": ingress, "agentstream-delivery": delivery}


def test_k8s_ingress_exposes_webhooks_messages_and_the_web_chat_only(
    manifests: dict[tuple[str, str], dict[str, Any]],
) -> None:
    (ingress,) = [doc for (kind, _), doc in manifests.items() if kind == "Ingress"]
    paths = [
        (p["path"], p["pathType"], p["backend"]["service"]["name"])
        for rule in ingress["spec"]["rules"]
        for p in rule["http"]["paths"]
    ]
    assert "defaultBackend" not in ingress["spec"]
    assert sorted(paths) == sorted(
        [
            ("/webhooks/", "Prefix", "agentstream-ingress"),
            ("/v1/messages", "Exact", "agentstream-ingress"),
            ("/web/", "Prefix", "agentstream-delivery"),
            ("/v1/web/", "Prefix", "agentstream-delivery"),
        ]
    )
    backends = {p["backend"]["service"]["name"] for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    assert "agentstream-persistence" not in backends
    for path, _, _ in paths:
        assert "metrics" not in path and not path.startswith(("/healthz", "/readyz", "/openapi", "/docs"))
    routes = _routes()
    for path, path_type, service in paths:
        assert ("Service", service) in manifests
        served = routes[service]
        # every exposed path leads to a real route, and no ops route hides under a prefix
        assert any(r == path if path_type == "Exact" else r.startswith(path) for r in served), (path, served)
        if path_type == "Prefix":
            assert not any(r.startswith(path) and r.endswith(("/metrics", "/healthz", "/readyz")) for r in served)
