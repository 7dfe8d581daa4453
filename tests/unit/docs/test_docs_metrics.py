"""docs/metrics.md is generated from the services' registries and must not drift; every metric a
panel, an alert or `agentstream top` reads is one a service exposes; no metric carries a per-person
label."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentstream_stack.metrics_doc import (
    MARKER,
    UNBOUNDED_LABELS,
    alert_rules,
    catalogue,
    dashboard_queries,
    main,
    metric_names,
    render,
)
from agentstream_stack.top_metrics import FIGURES

ROOT = Path(__file__).resolve().parents[3]
CHECKED_IN = ROOT / "docs" / "metrics.md"
# Building the five services (not starting them) to read their registries takes a few seconds.
pytestmark = pytest.mark.timeout(60)
SYNTHETIC = {"up"}  # Prometheus's own series of each target


def _family(series: str, known: set[str]) -> str | None:
    for candidate in (
        series,
        series.removesuffix("_bucket"),
        series.removesuffix("_sum"),
        series.removesuffix("_count"),
    ):
        if candidate in known:
            return candidate
    return None


def test_checked_in_document_is_up_to_date() -> None:
    current = CHECKED_IN.read_text(encoding="utf-8")
    assert MARKER in current, "docs/metrics.md lost its generated part: run `make docs`"
    assert current == render(current), "docs/metrics.md differs from the registries: run `make docs` and commit it"


def test_every_panel_and_alert_reads_metrics_a_service_exposes() -> None:
    known = set(catalogue())
    exprs = [e for es in dashboard_queries().values() for e in es] + list(alert_rules().values())
    assert len(exprs) > 30
    missing = {s for e in exprs for s in metric_names(e) if s not in SYNTHETIC and _family(s, known) is None}
    assert not missing, f"queried but exposed by no service: {sorted(missing)}"


def test_every_figure_of_top_reads_a_metric_a_service_exposes() -> None:
    # The first alternative is the current name; later ones stand in for older services.
    known = set(catalogue())
    current = {figure: source.alternatives[0].name for figure, source in FIGURES.items()}
    assert not {figure: name for figure, name in current.items() if name not in known}


def test_no_metric_has_a_label_per_chat_user_or_run() -> None:
    offending = {
        d.name: set(d.labels) & UNBOUNDED_LABELS for d in catalogue().values() if set(d.labels) & UNBOUNDED_LABELS
    }
    assert not offending


def test_process_and_gc_metrics_are_in_every_service() -> None:
    docs = catalogue()
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_gc_collections_total"):
        assert docs[name].services == {"ingress", "agent-runner", "tool-executor", "delivery", "persistence"}


def test_the_hand_written_part_is_kept_and_the_rest_regenerated(tmp_path: Path) -> None:
    out = tmp_path / "metrics.md"
    out.write_text(f"# Intro by hand\n\n{MARKER}\n\nstale table\n", encoding="utf-8")
    assert main([str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Intro by hand\n\n" + MARKER)
    assert "stale table" not in text and "`agentstream_consumer_lag`" in text
