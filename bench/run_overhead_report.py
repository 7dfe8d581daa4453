"""The run overhead benchmark's results (`bench.run_overhead`): each level's figures, the
report, and how it is printed and written as JSON."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

SATURATED = 0.85  # busy share (of each runner process, or of the machine) above which latency is queueing


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    runs: int
    first_p50_ms: float
    first_p99_ms: float
    last_p50_ms: float
    last_p99_ms: float
    runner_cpu_us_per_token: float = 0.0  # the runner process's CPU time / tokens streamed
    runner_cpu_share: float = 0.0  # the runner's CPU time / the level's wall time (1.0 = one core busy)
    events_per_s: float = 0.0  # records the runner wrote to `events` per second during the level
    loaded_p50_ms: float = 0.0  # raw round trip (paced probes) with that many records/s on the broker
    start_p50_ms: float = 0.0  # StartRun produced -> the model's request received (the runner's start work)
    runners: int = 1  # runner processes sharing the partitions
    tokens_per_s: float = 0.0  # tokens the model streamed per second during the level
    machine_busy: float = 0.0  # the whole machine's CPU use during the level (1.0 = every core busy)
    runner_rss_mb: float = 0.0  # the runner processes' resident memory at its highest during the level
    sdk_cpu_us_per_token: float = 0.0  # the bare SDK reading the same streams (bench.sdk_reader), same pacing
    reader_cpu_us_per_token: float = 0.0  # the runner's own connector reading them, and nothing else

    @property
    def sdk_ratio(self) -> float:
        """The runner's CPU per token over the bare SDK's: what sits between the chunk and the record."""
        return self.runner_cpu_us_per_token / self.sdk_cpu_us_per_token if self.sdk_cpu_us_per_token else 0.0

    @property
    def busy(self) -> float:
        """How busy the runner processes were: 1.0 = every one of them used a whole core."""
        return self.runner_cpu_share / self.runners

    @property
    def saturated(self) -> bool:
        """The runners or the machine were out of CPU: latency is queueing, not overhead."""
        return self.busy >= SATURATED or self.machine_busy >= SATURATED

    @property
    def tokens_per_core_s(self) -> float:
        """Tokens per second one fully busy runner process carries, at this level's mix."""
        return self.tokens_per_s / self.runner_cpu_share if self.runner_cpu_share else 0.0


@dataclass(frozen=True)
class OverheadReport:
    baseline_p50_ms: float
    baseline_p99_ms: float
    levels: list[LevelResult]
    tokens: int
    token_rate: float
    records_per_token: float
    extras: dict[str, float] = field(default_factory=dict)
    cores: int = field(default_factory=lambda: os.cpu_count() or 1)

    def ratio(self, ms: float) -> float:
        return ms / self.baseline_p50_ms


def format_report(report: OverheadReport) -> str:
    lines = [
        "Run overhead: fake model token -> Kafka event (agent-runner in the path)",
        "-" * 74,
        f"raw Kafka round trip (same run): p50 {report.baseline_p50_ms:.2f} ms, p99 {report.baseline_p99_ms:.2f} ms",
        f"runner processes: {report.levels[0].runners if report.levels else 1}; machine: {report.cores} cores "
        "(shared with the model server, the broker and this reader)",
        "",
        f"{'concurrent':>10} {'runs':>5}  {'first token p50/p99 (ms)':>26}  {'last token p50/p99 (ms)':>26}"
        f"  {'runner CPU':>34}  {'bare SDK CPU':>23}",
    ]
    for r in report.levels:
        first = f"{r.first_p50_ms:.1f}/{r.first_p99_ms:.1f} ({report.ratio(r.first_p50_ms):.1f}x)"
        last = f"{r.last_p50_ms:.1f}/{r.last_p99_ms:.1f} ({report.ratio(r.last_p50_ms):.1f}x)"
        cpu = f"{r.runner_cpu_us_per_token:.0f} us/token, {r.runner_cpu_share:.0%}, machine {r.machine_busy:.0%}" + (
            " SATURATED" if r.saturated else ""
        )
        sdk = f"{r.sdk_cpu_us_per_token:.0f} us/token, {r.sdk_ratio:.2f}x" if r.sdk_cpu_us_per_token else "-"
        sdk += f" (runner's reader {r.reader_cpu_us_per_token:.0f})" if r.reader_cpu_us_per_token else ""
        lines.append(f"{r.concurrency:>10} {r.runs:>5}  {first:>26}  {last:>26}  {cpu:>34}  {sdk:>23}")
    lines += [
        "",
        "the same levels against the raw round trip at the same broker load (paced probes while as many",
        "records/s as the runner wrote flow through the broker; raw aiokafka, no agentstream):",
        f"{'concurrent':>10} {'events/s':>9} {'raw p50 (ms)':>13} {'first token':>12} {'last token':>11}"
        f"  {'StartRun -> model request p50':>30}",
    ]
    for r in report.levels:
        if r.loaded_p50_ms:
            lines.append(
                f"{r.concurrency:>10} {r.events_per_s:>9,.0f} {r.loaded_p50_ms:>13.2f} "
                f"{r.first_p50_ms / r.loaded_p50_ms:>11.1f}x {r.last_p50_ms / r.loaded_p50_ms:>10.1f}x"
                f"  {r.start_p50_ms:>27.1f} ms"
            )
    if saturated := [r for r in report.levels if r.saturated]:
        top = max(r.tokens_per_core_s for r in saturated)
        lines += [
            "",
            f"SATURATED: the runner processes or the whole machine were busy >= {SATURATED:.0%} of the time,",
            "so that level's latency is queueing for CPU, not overhead. One busy runner process carried about",
            f"{top:,.0f} tokens/s here; a level needs (concurrent runs x tokens/s per run) / that many runner",
            "processes, each on a core of its own beside the model server and the broker (`--runners N`: the",
            "partitions of `runs` are split between them).",
        ]
    lines += [
        "",
        f"Kafka records per generated token at {report.token_rate:g} tokens/s: "
        f"{report.records_per_token:.3f} ({int(report.extras['long_run_records'])} records / {report.tokens} tokens)",
        "  by type: "
        + ", ".join(
            f"{k.removeprefix('long_run.')} {int(v)}" for k, v in report.extras.items() if k.startswith("long_run.")
        ),
        "targets: p50 overhead <= 3x the raw round trip; <= 0.25 records per token; runner CPU per token",
        "<= 1.5x the bare SDK's (bench.sdk_reader: the same streams read with the openai SDK, nothing else;",
        "the runner's reader: its connector reading them, nothing else — the rest is coalescing, events, Kafka)",
    ]
    return "\n".join(lines)


def report_json(report: OverheadReport) -> dict[str, Any]:
    """The report as JSON, each level with its derived figures (busy, saturated, capacity)."""
    out = asdict(report)
    for level, data in zip(report.levels, out["levels"], strict=True):
        data.update(
            busy=level.busy,
            saturated=level.saturated,
            tokens_per_core_s=level.tokens_per_core_s,
            sdk_ratio=level.sdk_ratio,
        )
    return out
