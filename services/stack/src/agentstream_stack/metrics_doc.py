"""docs/metrics.md from the services' own registries: `python -m agentstream_stack.metrics_doc docs/metrics.md`.

Every service is built (not started) from default settings and its registry walked: name, type,
help text and labels come from the metrics themselves, which services expose them from the
registries, and which dashboard panels and alert rules use them from `monitoring/`. The text
above the marker line is written by hand and kept as it is.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from agentstream.config import SERVICES, Settings
from agentstream.config.tools import ToolsSettings
from agentstream.observability import configure_logging
from agentstream_stack.services import build_all

ROOT = Path(__file__).resolve().parents[4]
DASHBOARD = ROOT / "monitoring" / "grafana" / "dashboards" / "agentstream-overview.json"
ALERTS = ROOT / "monitoring" / "alerts.yml"
MARKER = "<!-- Generated below by `make docs` (python -m agentstream_stack.metrics_doc); edit above only. -->"
# A label that names one person, chat or run would make a series per user: never exported.
UNBOUNDED_LABELS = frozenset({"chat_id", "user_id", "run_id", "root_run_id", "conversation_key", "thread_id", "id"})
_NAME = re.compile(r"\b([a-z_][a-z0-9_]*)\b")


@dataclass
class MetricDoc:
    name: str  # as exposed (counters with `_total`)
    type: str
    help: str
    labels: tuple[str, ...]
    services: set[str] = field(default_factory=set)
    used_by: list[str] = field(default_factory=list)


def _labels_of(registry: CollectorRegistry) -> dict[str, tuple[str, ...]]:
    """Label names per family. prometheus_client keeps them on the collector only (`_labelnames`),
    not in what `collect()` returns for a metric with no child yet."""
    found: dict[str, tuple[str, ...]] = {}
    for collector, names in registry._collector_to_names.items():  # noqa: SLF001 - no public accessor
        labelnames = tuple(getattr(collector, "_labelnames", ()))
        for name in names:
            found[name] = labelnames
    return found


def _exposed_name(name: str, kind: str) -> str:
    return f"{name}_total" if kind == "counter" else name


@cache
def catalogue() -> dict[str, MetricDoc]:
    """Every metric family of every service's registry, by exposed name."""
    logging.disable(logging.WARNING)  # building services logs setup warnings meant for operators
    try:
        # No secret is needed to list metrics: the services are built, never started.
        services = build_all(Settings(tools=ToolsSettings(accept_unsigned_calls=True)))
    finally:
        logging.disable(logging.NOTSET)
    docs: dict[str, MetricDoc] = {}
    for service in services:
        labels = _labels_of(service.registry)
        for family in service.registry.collect():
            name = _exposed_name(family.name, family.type)
            family_labels = labels.get(name) or labels.get(family.name)
            if family_labels is None:  # a custom collector (python_info): its samples carry the labels
                family_labels = tuple(sorted({k for s in family.samples for k in s.labels}))
            doc = docs.setdefault(name, MetricDoc(name, family.type, family.documentation, family_labels))
            doc.services.add(service.name)
    for name, users in usage().items():
        if name in docs:
            docs[name].used_by = users
    return docs


def metric_names(expr: str) -> set[str]:
    """The metric families a PromQL expression reads (names with a known family prefix)."""
    names = set()
    for word in _NAME.findall(expr):
        if word.startswith(("agentstream_", "process_", "python_", "faststream_")) or word == "up":
            names.add(word)
    return names


def dashboard_queries() -> dict[str, list[str]]:
    """Panel title → its queries."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return {
        p["title"]: [t["expr"] for t in p.get("targets", [])] for p in dashboard["panels"] if p.get("type") != "row"
    }


def alert_rules() -> dict[str, str]:
    """Alert name → its expression."""
    rules = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"] if "alert" in r}


def usage() -> dict[str, list[str]]:
    """Metric family (exposed name) → the panels and alerts that read it."""
    used: dict[str, list[str]] = {}
    exprs = [(f"panel: {t}", e) for t, es in dashboard_queries().items() for e in es]
    exprs += [(f"alert: {name}", e) for name, e in alert_rules().items()]
    for where, expr in exprs:
        for series in metric_names(expr):
            name = series.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            users = used.setdefault(name, [])
            if where not in users:
                users.append(where)
    return used


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_catalogue(docs: dict[str, MetricDoc]) -> str:
    lines = [MARKER, "", "## Catalogue", ""]
    groups = (
        ("Every service", lambda d: d.services == set(SERVICES)),
        *((f"{svc}", lambda d, svc=svc: d.services == {svc}) for svc in SERVICES),
        ("Some services", lambda d: 1 < len(d.services) < len(SERVICES)),
    )
    for title, belongs in groups:
        members = sorted((d for d in docs.values() if belongs(d)), key=lambda d: d.name)
        if not members:
            continue
        lines += [f"### {title}", ""]
        if title == "Some services":
            lines += ["| name | type | labels | services | meaning | used by |", "|---|---|---|---|---|---|"]
        else:
            lines += ["| name | type | labels | meaning | used by |", "|---|---|---|---|---|"]
        for d in members:
            labels = ", ".join(f"`{label}`" for label in d.labels) or "—"
            used = "; ".join(d.used_by) or "—"
            row = [f"`{d.name}`", d.type, labels]
            if title == "Some services":
                row.append(", ".join(sorted(d.services)))
            row += [_cell(d.help), _cell(used)]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def render(current: str) -> str:
    """The document: `current`'s hand-written part, then the generated catalogue."""
    intro = current.split(MARKER, 1)[0].rstrip() + "\n\n" if MARKER in current else current.rstrip() + "\n\n"
    return intro + render_catalogue(catalogue())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m agentstream_stack.metrics_doc docs/metrics.md", file=sys.stderr)
        return 2
    configure_logging("ERROR")  # building the services warns about settings an operator would set
    path = Path(args[0])
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(render(current), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
