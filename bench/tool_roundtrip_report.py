"""The tool round trip's figures (`bench.tool_roundtrip` measures them): per tool and level the
round trip beside the raw one, the executor's CPU and share, the targets; as text and as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

FUNCTION_TOOL = "bench__noop"
MCP_TOOL = "mcp__noop"
TOOLS = {"function": FUNCTION_TOOL, "mcp": MCP_TOOL}
TARGET_RATIO = 3.0
CPU_TARGET_MS = 0.2  # the executor's CPU per function-tool call, judged where calls come together:
CPU_TARGET_PARALLEL = 50  # at this many in flight or more
SATURATED_BUSY = 0.8  # of one core: past it the executor's loop, not the broker, sets the pace


@dataclass(frozen=True)
class Level:
    tool: str
    parallel: int
    calls: int
    p50_ms: float
    p99_ms: float
    raw_p50_ms: float  # the raw round trip at the same parallelism
    raw_p99_ms: float
    executor_p50_ms: float  # the executor's own `duration_ms` (lookup, arguments, the tool): p50
    executor_cpu_ms: float  # CPU time of the executor process per call (Linux /proc)
    executor_busy: float = 0.0  # the executor's CPU seconds per wall second over the level (1.0: one core)

    @property
    def saturated(self) -> bool:
        """The executor's one event loop used (almost) a whole core: it could not go faster here."""
        return self.executor_busy >= SATURATED_BUSY

    @property
    def capacity_per_s(self) -> float:
        """Calls one executor process answers per second of one core, at this level's CPU per call."""
        return 1000 / self.executor_cpu_ms if self.executor_cpu_ms > 0 else float("inf")

    @property
    def p50_ratio(self) -> float:
        return self.p50_ms / self.raw_p50_ms

    @property
    def p99_ratio(self) -> float:
        return self.p99_ms / self.raw_p99_ms


@dataclass
class Report:
    raw: dict[int, tuple[float, float]]  # parallel → (p50, p99) of the raw round trip over `partitions`
    levels: list[Level] = field(default_factory=list)
    store_p50_ms: float = 0.0  # the at-most-once store alone: claim + finish of one call, p50
    store_cpu_ms: float = 0.0  # its CPU per call
    database: str = ""
    raw_one_partition: tuple[float, float] = (0.0, 0.0)  # (p50, p99), one record at a time, for reference
    partitions: int = 1  # of the raw round trip's topic, as of tool-calls and tool-results

    def level(self, tool: str, parallel: int) -> Level:
        return next(lv for lv in self.levels if lv.tool == tool and lv.parallel == parallel)

    def has(self, tool: str) -> bool:
        return any(lv.tool == tool for lv in self.levels)

    def mcp_share(self, parallel: int) -> tuple[float, float]:
        """(p50 round trip of MCP minus that of the function tool, p50 time inside the MCP call)."""
        mcp, fn = self.level(MCP_TOOL, parallel), self.level(FUNCTION_TOOL, parallel)
        return mcp.p50_ms - fn.p50_ms, mcp.executor_p50_ms

    @property
    def target_met(self) -> bool:
        """The function tool within the target at every level where the executor had a core to spare."""
        return all(lv.p50_ratio <= TARGET_RATIO for lv in self.levels if lv.tool == FUNCTION_TOOL and not lv.saturated)

    @property
    def cpu_judged(self) -> list[Level]:
        return [lv for lv in self.levels if lv.tool == FUNCTION_TOOL and lv.parallel >= CPU_TARGET_PARALLEL]

    @property
    def cpu_target_met(self) -> bool | None:
        """The executor's CPU per function-tool call within the target at every level of
        `CPU_TARGET_PARALLEL` or more in flight; None when no such level ran."""
        judged = self.cpu_judged
        return all(lv.executor_cpu_ms <= CPU_TARGET_MS for lv in judged) if judged else None


def format_report(report: Report) -> str:
    lines = [
        "Tool round trip: tool-calls produced -> tool-results consumed (no-op tool)",
        "-" * 74,
        "raw Kafka round trip (produce -> consume, plain aiokafka, same broker, same run),",
        f"over {report.partitions} partitions read whole, as tool-calls and tool-results are:",
    ]
    lines += [
        f"  {p:>3} in flight   p50 {p50:6.2f} ms   p99 {p99:6.2f} ms" for p, (p50, p99) in sorted(report.raw.items())
    ]
    one_p50, one_p99 = report.raw_one_partition
    lines.append(f"  one partition, 1 in flight (reference)   p50 {one_p50:6.2f} ms   p99 {one_p99:6.2f} ms")
    lines += [
        "",
        f"{'tool':<13}{'parallel':>8}{'calls':>7}{'p50 ms':>9}{'p99 ms':>9}{'p50/raw':>9}{'p99/raw':>9}"
        f"{'in executor p50':>17}{'executor CPU/call':>19}",
    ]
    for lv in report.levels:
        name = "function" if lv.tool == FUNCTION_TOOL else "MCP stdio"
        lines.append(
            f"{name:<13}{lv.parallel:>8}{lv.calls:>7}{lv.p50_ms:>9.2f}{lv.p99_ms:>9.2f}"
            f"{lv.p50_ratio:>8.1f}x{lv.p99_ratio:>8.1f}x{lv.executor_p50_ms:>14.2f} ms{lv.executor_cpu_ms:>16.2f} ms"
        )
    lines.append("")
    both = report.has(MCP_TOOL) and report.has(FUNCTION_TOOL)
    for parallel in sorted({lv.parallel for lv in report.levels}) if both else ():
        extra, inside = report.mcp_share(parallel)
        mcp = report.level(MCP_TOOL, parallel)
        lines.append(
            f"MCP share, {parallel} in flight: the MCP call p50 {inside:.2f} ms inside the executor "
            f"({inside / mcp.p50_ms:.0%} of the MCP round trip); MCP round trip - function round trip "
            f"= {extra:+.2f} ms"
        )
    lines.append(
        f"of which the at-most-once store ({report.database}, claim + finish, measured alone): "
        f"p50 {report.store_p50_ms:.2f} ms, {report.store_cpu_ms:.2f} ms CPU per call"
    )
    for lv in report.levels:
        if lv.saturated:
            name = "function" if lv.tool == FUNCTION_TOOL else "MCP stdio"
            lines.append(
                f"SATURATED: {name}, {lv.parallel} in flight — the executor used {lv.executor_busy:.0%} of a core; "
                f"capacity {lv.capacity_per_s:,.0f} calls/s per executor process and core"
            )
    verdict = "met" if report.target_met else "NOT met"
    lines.append(
        f"target: function tool p50 <= {TARGET_RATIO:g}x raw p50 at the same parallelism, "
        f"where the executor is not saturated: {verdict}"
    )
    cpu = report.cpu_target_met
    cpu_verdict = "not judged (no level that large)" if cpu is None else "met" if cpu else "NOT met"
    lines.append(
        f"target: executor CPU per function-tool call <= {CPU_TARGET_MS:g} ms at {CPU_TARGET_PARALLEL}+ in flight: "
        f"{cpu_verdict}"
    )
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    return {
        "raw": {str(p): {"p50_ms": p50, "p99_ms": p99} for p, (p50, p99) in report.raw.items()},
        "raw_partitions": report.partitions,
        "raw_one_partition": {"p50_ms": report.raw_one_partition[0], "p99_ms": report.raw_one_partition[1]},
        "levels": [
            asdict(lv) | {"p50_ratio": lv.p50_ratio, "p99_ratio": lv.p99_ratio, "saturated": lv.saturated}
            for lv in report.levels
        ],
        "mcp_share": {
            str(p): dict(zip(("extra_p50_ms", "inside_p50_ms"), report.mcp_share(p), strict=True))
            for p in sorted({lv.parallel for lv in report.levels})
        }
        if report.has(MCP_TOOL) and report.has(FUNCTION_TOOL)
        else {},
        "store": {"database": report.database, "p50_ms": report.store_p50_ms, "cpu_ms": report.store_cpu_ms},
        "target_met": report.target_met,
        "cpu_target_ms": CPU_TARGET_MS,
        "cpu_target_met": report.cpu_target_met,
    }
