"""Shared by the deployment-file tests: the repository's compose file and k8s manifests, parsed.

No Docker engine or cluster is needed: files are parsed as YAML, rendered with `kubectl
kustomize` (or `kustomize build`) and validated against the Kubernetes, CRD and Compose schemas.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from agentstream_testing.commands import command_path

ROOT = Path(__file__).resolve().parents[3]
K8S = ROOT / "k8s"
BASE = K8S / "base"
OVERLAYS = ("dev", "prod")
CRD_SCHEMAS = ROOT / "tests" / "data" / "crds"
SERVE_ARGS = ["--host", "0.0.0.0", "--port", "8080"]
Manifests = dict[tuple[str, str], dict[str, Any]]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the variables a test sets may reach `load_settings`."""
    for name in list(os.environ):
        if name.startswith("AGENTSTREAM"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return yaml.safe_load((BASE / "kustomization.yaml").read_text())


@pytest.fixture(scope="module")
def manifests(kustomization: dict[str, Any]) -> Manifests:
    """The base's resources as written (before kustomize), by (kind, name)."""
    docs: Manifests = {}
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((BASE / resource).read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def kustomize_command() -> list[str]:
    """`kustomize build`, else `kubectl kustomize`; the test is skipped without either (fails in CI)."""
    path = command_path("kustomize", "kubectl", installed_by="the machine's kubectl, or kustomize")
    return [path, "build"] if Path(path).name == "kustomize" else [path, "kustomize"]


@cache
def rendered(directory: str) -> tuple[dict[str, Any], ...]:
    """`kustomize build` of a directory under k8s/ (cached: one build per directory and run)."""
    cmd = kustomize_command()
    out = subprocess.run([*cmd, str(K8S / directory)], capture_output=True, text=True, timeout=60, check=True)
    return tuple(yaml.safe_load_all(out.stdout))


def by_kind(docs: tuple[dict[str, Any], ...], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


@cache
def crd_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    group, version = api_version.split("/")
    path = CRD_SCHEMAS / f"{group}_{kind.lower()}_{version}.json"
    if not path.exists():
        raise LookupError(f"no vendored schema for {api_version} {kind} ({path.name})")
    return jsonschema.Draft7Validator(json.loads(path.read_text()))


def crd_errors(doc: dict[str, Any]) -> list[str]:
    """Schema violations of a custom resource against its vendored CRD schema."""
    validator = crd_validator(doc["apiVersion"], doc["kind"])
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
