"""The benchmark report: every figure with its target and its ratio to the baseline of the same
run, as a Markdown table, and one PNG per curve (matplotlib, no display needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt  # noqa: E402


@dataclass(frozen=True)
class Figure:
    """One measured number. `ratio` is `value / baseline`, where `versus` names the baseline
    measured in the same run (the raw broker, the naive consumer, no rendering …)."""

    bench: str
    name: str
    value: float
    unit: str
    target: str = ""
    ratio: float | None = None
    versus: str = ""
    note: str = ""  # e.g. SATURATED: the level's latency is queueing for CPU


@dataclass(frozen=True)
class Series:
    label: str
    x: list[float]
    y: list[float]
    marked: list[bool] = field(default_factory=list)  # points drawn as crosses (saturated levels)


@dataclass(frozen=True)
class Curve:
    """One plot: `panels` side by side, each (y label, its series), over one x axis."""

    file: str
    title: str
    x_label: str
    panels: list[tuple[str, list[Series]]]
    log_x: bool = False
    columns: int = 3  # panels per row


@dataclass
class Report:
    title: str
    figures: list[Figure] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # benchmarks that did not finish, with why
    lines: list[str] = field(default_factory=list)  # context printed above the table

    def add(self, *figures: Figure) -> None:
        self.figures.extend(figures)


def _number(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 0.01 else f"{value:.2g}"


def table(figures: Sequence[Figure]) -> str:
    lines = [
        "| benchmark | figure | value | target | ratio | baseline (same run) | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        ratio = f"{f.ratio:.2f}×" if f.ratio is not None else "—"
        lines.append(
            f"| {f.bench} | {f.name} | {_number(f.value)} {f.unit} | {f.target or '—'} | {ratio} | "
            f"{f.versus or '—'} | {f.note} |"
        )
    return "\n".join(lines)


def plot(curve: Curve, directory: Path) -> Path:
    columns = min(len(curve.panels), curve.columns)
    rows = -(-len(curve.panels) // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(6 * columns, 4.2 * rows), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[len(curve.panels) :]:
        ax.set_visible(False)
    for ax, (y_label, series) in zip(axes, curve.panels, strict=False):
        for s in series:
            (line,) = ax.plot(s.x, s.y, marker="o", label=s.label)
            hot = [(x, y) for x, y, m in zip(s.x, s.y, s.marked, strict=False) if m]
            if hot:
                ax.scatter(*zip(*hot, strict=True), marker="x", s=90, color=line.get_color(), zorder=3)
        ax.set_xlabel(curve.x_label)
        ax.set_ylabel(y_label)
        if curve.log_x:
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(curve.title)
    fig.tight_layout()
    path = directory / curve.file
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write(report: Report, directory: Path) -> Path:
    """`directory/report.md` and one PNG per curve; returns the report's path."""
    directory.mkdir(parents=True, exist_ok=True)
    pngs = [plot(curve, directory) for curve in report.curves if any(s.x for _, ss in curve.panels for s in ss)]
    parts = [f"# {report.title}", "", *report.lines, "", table(report.figures), ""]
    if any(f.note.startswith("SATURATED") for f in report.figures):
        parts += [
            "SATURATED: the processes under test or the whole machine were busy ≥ 85% of the time during that "
            "level, so its latency is queueing for CPU, not overhead; its capacity figure says how many tokens "
            "per second one busy runner process carried.",
            "",
        ]
    if report.errors:
        parts += ["## Not measured", "", *(f"- FAIL {e}" for e in report.errors), ""]
    if pngs:
        parts += ["## Plots", "", *(f"![{p.stem}]({p.name})" for p in pngs), ""]
    path = directory / "report.md"
    path.write_text("\n".join(parts))
    return path
