"""A Prometheus Operator `PrometheusRule` holding the alert rules of a Prometheus rule file.

The rule file (`groups:`) is what a plain Prometheus loads; the cluster gets the same groups,
so the alerts are written once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

PROMETHEUS_OPERATOR_API = "monitoring.coreos.com/v1"


class NotARuleFile(ValueError):
    """The file is not a Prometheus rule file."""


def prometheus_rule(rule_file: Path, name: str = "agentstream") -> dict[str, Any]:
    try:
        data = yaml.safe_load(rule_file.read_text())
    except yaml.YAMLError as err:
        raise NotARuleFile(f"{rule_file}: not valid YAML ({' '.join(str(err).split())})") from err
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list) or not groups:
        raise NotARuleFile(f"{rule_file}: no `groups:` list of rule groups")
    for group in groups:
        if not isinstance(group, dict) or not group.get("name") or not isinstance(group.get("rules"), list):
            raise NotARuleFile(f"{rule_file}: every group needs a `name` and a `rules` list: {group!r}")
    return {
        "apiVersion": PROMETHEUS_OPERATOR_API,
        "kind": "PrometheusRule",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "agentstream"}},
        "spec": {"groups": groups},
    }
