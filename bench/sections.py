"""The sections of `bench.all`'s report: each runs one benchmark at the run's sizes, on the run's
broker, and adds its figures (with their targets and ratios to the same run's baseline) and
curves to the report. `bench.all` drives them, one after the other."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from bench import (
    cli_startup,
    delivery_efficiency,
    formatting,
    message_path,
    run_overhead,
    stream_capacity,
    tool_roundtrip,
)
from bench.ingress_http import TARGET_RATIO as HTTP_TARGET
from bench.ingress_http import measure_http
from bench.ingress_throughput import (
    PG_ADMIN_DEFAULT,
    PG_ADMIN_ENV,
    USERS,
    bench_settings,
    measure_ingress,
    temporary_pg_database,
)
from bench.kafka_baseline import BaselineResult
from bench.report import Curve, Figure, Report, Series
from bench.sizes import Sizes


@dataclass(frozen=True)
class Context:
    bootstrap: str
    baseline: BaselineResult
    sizes: Sizes
    embedded: bool  # the broker is the embedded Tansu: its tuning applies (`agentstream.kafka.flavor`)


async def kafka_baseline(ctx: Context, report: Report) -> None:
    b = ctx.baseline
    report.add(
        Figure("kafka_baseline", "raw round trip p50", b.p50_ms, "ms", ratio=1.0, versus="itself"),
        Figure("kafka_baseline", "raw round trip p99", b.p99_ms, "ms", ratio=b.p99_ms / b.p50_ms, versus="raw p50"),
        Figure("kafka_baseline", "raw throughput", b.msgs_per_s, "msg/s", ratio=1.0, versus="itself"),
    )


async def overhead(ctx: Context, report: Report) -> None:
    s = ctx.sizes
    result = await run_overhead.run_bench(
        ctx.bootstrap,
        embedded=ctx.embedded,
        levels=s.levels,
        tokens=s.tokens,
        rate=s.token_rate,
        long_tokens=s.long_tokens,
        min_runs=s.min_runs,
        baseline_messages=s.baseline_messages,
    )
    raw = ctx.baseline.p50_ms
    for lv in result.levels:
        note = f"SATURATED: one runner ≈ {lv.tokens_per_core_s:,.0f} tokens/s" if lv.saturated else ""
        at = f"{lv.concurrency} concurrent"
        report.add(
            Figure(
                "run_overhead",
                f"first token p50, {at}",
                lv.first_p50_ms,
                "ms",
                "≤ 3× raw",
                lv.first_p50_ms / raw,
                "raw round trip p50",
                note,
            ),
            Figure(
                "run_overhead",
                f"first token p50 vs loaded raw, {at}",
                lv.first_p50_ms,
                "ms",
                "≤ 3× raw",
                lv.first_p50_ms / lv.loaded_p50_ms if lv.loaded_p50_ms else None,
                f"raw p50 at {lv.events_per_s:,.0f} rec/s",
                note,
            ),
            Figure(
                "run_overhead",
                f"last token p50, {at}",
                lv.last_p50_ms,
                "ms",
                "≤ 3× raw",
                lv.last_p50_ms / raw,
                "raw round trip p50",
                note,
            ),
            Figure(
                "run_overhead",
                f"StartRun → model request p50, {at}",
                lv.start_p50_ms,
                "ms",
                ratio=lv.start_p50_ms / raw,
                versus="raw round trip p50",
                note=note,
            ),
            Figure("run_overhead", f"runner CPU per token, {at}", lv.runner_cpu_us_per_token, "µs", note=note),
            Figure("run_overhead", f"runner RSS peak, {at}", lv.runner_rss_mb, "MiB"),
            Figure("run_overhead", f"machine busy, {at}", lv.machine_busy * 100, "%", "< 85%"),
        )
    report.add(
        Figure(
            "run_overhead",
            f"records per token ({result.token_rate:g} tokens/s)",
            result.records_per_token,
            "",
            "≤ 0.25",
        )
    )
    xs = [float(lv.concurrency) for lv in result.levels]
    hot = [lv.saturated for lv in result.levels]
    report.curves += [
        Curve(
            "overhead_vs_concurrency.png",
            "Run overhead vs concurrent runs (× = SATURATED)",
            "concurrent runs",
            [
                (
                    "p50 (ms)",
                    [
                        Series("first token", xs, [lv.first_p50_ms for lv in result.levels], hot),
                        Series("last token", xs, [lv.last_p50_ms for lv in result.levels], hot),
                        Series("raw round trip at the same load", xs, [lv.loaded_p50_ms for lv in result.levels]),
                    ],
                ),
                (
                    "× raw round trip (idle)",
                    [
                        Series("first token", xs, [lv.first_p50_ms / raw for lv in result.levels], hot),
                        Series("target 3×", xs, [3.0] * len(xs)),
                    ],
                ),
            ],
            log_x=True,
        ),
        Curve(
            "cpu_per_token_vs_concurrency.png",
            "Runner CPU per token vs concurrent runs",
            "concurrent runs",
            [
                (
                    "µs CPU per token",
                    [Series("agent-runner", xs, [lv.runner_cpu_us_per_token for lv in result.levels], hot)],
                ),
                (
                    "share of one core",
                    [
                        Series("agent-runner", xs, [lv.runner_cpu_share for lv in result.levels], hot),
                        Series("machine (all cores)", xs, [lv.machine_busy for lv in result.levels]),
                    ],
                ),
            ],
            log_x=True,
        ),
        Curve(
            "rss_vs_streams.png",
            "Agent-runner resident memory vs concurrent streams",
            "concurrent runs (streams)",
            [("peak RSS (MiB)", [Series("agent-runner", xs, [lv.runner_rss_mb for lv in result.levels])])],
            log_x=True,
        ),
    ]


async def delivery(ctx: Context, report: Report) -> None:
    s = ctx.sizes
    results = [await delivery_efficiency.compare(n, s.stream_seconds, s.delta_rate) for n in s.streams]
    for r in results:
        ours, naive = r.agentstream, r.naive
        at = f"{r.streams} streams"
        report.add(
            Figure(
                "delivery_efficiency",
                f"API calls per message, {at}",
                ours.calls_per_message,
                "",
                "≥ 10× fewer than naive",
                ours.calls_per_message / max(naive.calls_per_message, 0.01),
                "naive consumer",
            ),
            Figure(
                "delivery_efficiency",
                f"429 answers, {at}",
                ours.rate_limited,
                "",
                "0",
                None,
                f"naive: {naive.rate_limited}",
            ),
            Figure(
                "delivery_efficiency", f"run.finished → final visible p50, {at}", ours.final_p50_ms, "ms", "≤ 800 ms"
            ),
            Figure("delivery_efficiency", f"exact finals, {at}", ours.exact_finals_pct, "%", "100%"),
        )
    xs = [float(r.streams) for r in results]
    report.curves.append(
        Curve(
            "delivery_vs_streams.png",
            f"Delivery into a fake Telegram (1 call/s per chat), {s.delta_rate:g} deltas/s for {s.stream_seconds:g} s",
            "concurrent streams",
            [
                (
                    "API calls per chat",
                    [
                        Series("agentstream", xs, [r.agentstream.calls_per_message for r in results]),
                        Series("naive", xs, [r.naive.calls_per_message for r in results]),
                    ],
                ),
                (
                    "run.finished → final visible p50 (ms)",
                    [Series("agentstream", xs, [r.agentstream.final_p50_ms for r in results])],
                ),
            ],
        )
    )


async def ingress(ctx: Context, report: Report) -> None:
    admin = os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)
    async with temporary_pg_database(admin) as db_url:
        r = await measure_ingress(
            ctx.bootstrap, db_url, ctx.sizes.ingress_messages, embedded=ctx.embedded, baseline=ctx.baseline
        )
    report.add(
        Figure(
            "ingress_throughput",
            "inbound → runs (PostgreSQL, dedupe, authz)",
            r.msgs_per_s,
            "msg/s",
            "≥ 50% of raw",
            r.ratio,
            "raw throughput",
        ),
    )
    if r.cpu_us_per_msg is not None:  # None: ingress ran inside this process
        report.add(Figure("ingress_throughput", "ingress CPU per record", r.cpu_us_per_msg, "µs"))


async def path(ctx: Context, report: Report) -> None:
    """A message's way to its model request, per hop (bench.message_path), on each database of the mode."""
    s = ctx.sizes
    for kind in s.path_databases:
        async with message_path.database(kind) as db_url:
            r = await message_path.measure(
                ctx.bootstrap,
                True,
                db_url,
                broker="embedded",
                levels=s.path_levels,
                min_runs=s.path_runs,
                baseline=ctx.baseline,
            )
        for level in r.levels:
            for hop in level.hops:
                total = hop.hop == message_path.TOTAL
                report.add(
                    Figure(
                        "message_path",
                        f"{hop.hop} p50, {level.conversations} conv, {r.database}",
                        hop.p50_ms,
                        "ms",
                        f"≤ {r.target_ms:.0f} ms" if total else "",
                        hop.p50_ms / r.raw_p50_ms if r.raw_p50_ms else None,
                        "raw round trip p50",
                        f"p99 {hop.p99_ms:.1f} ms, {hop.samples} runs",
                    )
                )


async def ingress_http(ctx: Context, report: Report) -> None:
    """POST /v1/messages with the credential check beside the same without it (full mode only)."""
    if not ctx.sizes.http_requests:
        return
    async with temporary_pg_database(os.environ.get(PG_ADMIN_ENV, PG_ADMIN_DEFAULT)) as db_url:
        r = await measure_http(
            lambda extra: bench_settings(ctx.bootstrap, db_url, ctx.embedded, extra),
            db_url,
            USERS,
            requests=ctx.sizes.http_requests,
        )
    if r.failed:
        raise RuntimeError(f"{r.failed} requests were not accepted: the figures mean nothing")
    report.add(
        Figure(
            "ingress_http",
            "POST /v1/messages accepted, credential checked",
            r.rate(True),
            "req/s",
            f"≥ {HTTP_TARGET:.0%} of unchecked",
            r.ratio,
            "the same without the check",
        ),
        Figure("ingress_http", "POST /v1/messages accepted, unchecked", r.rate(False), "req/s"),
    )


async def tools(ctx: Context, report: Report) -> None:
    s = ctx.sizes
    r = await tool_roundtrip.run_bench(
        ctx.bootstrap,
        embedded=ctx.embedded,
        parallels=s.tool_parallels,
        calls=s.tool_calls,
        baseline_messages=s.baseline_messages,
    )
    for lv in r.levels:
        name = "function" if lv.tool == tool_roundtrip.FUNCTION_TOOL else "MCP stdio"
        target = f"≤ {tool_roundtrip.TARGET_RATIO:g}× raw" if lv.tool == tool_roundtrip.FUNCTION_TOOL else ""
        judged = lv in r.cpu_judged
        cpu = (lv.executor_cpu_ms, "ms", f"≤ {tool_roundtrip.CPU_TARGET_MS:g} ms" if judged else "")
        report.add(
            Figure(
                "tool_roundtrip",
                f"{name} p50, {lv.parallel} in flight",
                lv.p50_ms,
                "ms",
                target,
                lv.p50_ratio,
                f"raw p50, {lv.parallel} in flight",
            ),
            Figure("tool_roundtrip", f"{name} executor CPU per call, {lv.parallel} in flight", *cpu),
        )
    report.add(Figure("tool_roundtrip", f"at-most-once store claim + finish p50 ({r.database})", r.store_p50_ms, "ms"))


async def render(ctx: Context, report: Report) -> None:
    r = formatting.measure(ctx.sizes.formatting_chars)
    report.add(
        *(
            Figure(
                "formatting",
                f"state machine per delta, {markup}",
                us,
                "µs",
                f"≤ {formatting.TARGET_RATIO:g}× passthrough",
                r.ratios[markup],
                "Markdown passed through",
            )
            for markup, us in r.per_delta_us.items()
        ),
        Figure(
            "formatting", "state machine per delta, Markdown passed through", r.per_delta_us_markdown_passthrough, "µs"
        ),
        *(
            Figure("formatting", f"one {r.chars}-char frame rendered whole, {markup}", ms, "ms")
            for markup, ms in r.render_ms.items()
        ),
    )


async def capacity(ctx: Context, report: Report) -> None:
    s = ctx.sizes
    r = await stream_capacity.measure(
        first=s.capacity_first, levels=list(s.capacity_levels) or None, seconds=s.capacity_seconds
    )
    judged = "largest level carried" if not s.capacity_levels else f"of the levels {s.capacity_levels}"
    for cap, versus in ((r.telegram_html, "Markdown passed through"), (r.passthrough, "")):
        report.add(
            Figure(
                "stream_capacity",
                f"streams one delivery process carries ({judged}), {cap.markup}",
                cap.streams,
                "streams",
                "final p50 ≤ 800 ms, 0 × 429",
                cap.streams / max(r.passthrough.streams, 1) if versus else None,
                versus,
            ),
            Figure(
                "stream_capacity",
                f"delivery CPU per delta, {cap.markup}",
                cap.cpu_us_per_delta,
                "µs",
                ratio=r.cpu_ratio if versus else None,
                versus=versus,
            ),
            Figure(
                "stream_capacity",
                f"streams a whole core carries (CPU), {cap.markup}",
                cap.streams_per_core(20.0),
                "streams",
            ),
        )


async def cli(ctx: Context, report: Report) -> None:
    n = ctx.sizes.cli_processes
    base, _ = await asyncio.to_thread(cli_startup.medians_s, cli_startup.CASES["baseline: python -c pass"], n)
    help_s, help_cpu = await asyncio.to_thread(cli_startup.medians_s, cli_startup.CASES["agentstream --help"], n)
    report.add(
        Figure(
            "cli_startup",
            "agentstream --help wall",
            help_s * 1000,
            "ms",
            f"< {cli_startup.TARGET_S * 1000:.0f} ms",
            help_s / base,
            "python -c pass",
        ),
        Figure("cli_startup", "agentstream --help CPU", help_cpu * 1000, "ms"),
    )
