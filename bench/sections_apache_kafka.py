"""The sections of `bench.all`'s report that need Apache Kafka itself, whatever broker the run is
on (full mode only: each takes minutes): what Kafka transactions would cost (`bench.kafka_transactions`;
Tansu has none) and the rebalances of a rolling restart per membership setting
(`bench.rebalance_cost`, read from the broker's own log). On the embedded-broker run each starts a
1-node Apache Kafka on the JVM of its own."""

from __future__ import annotations

from bench import kafka_transactions, rebalance_cost
from bench.report import Figure, Report
from bench.sections import Context

TRANSACTION_BATCHES = (1, 100)  # the executor (and ingress at low load); ingress under load


async def transactions(ctx: Context, report: Report) -> None:
    """Transactional ÷ current consume → produce → commit loop, per batch size, same broker."""
    if not ctx.sizes.transaction_records:
        return
    bootstrap = None if ctx.embedded else ctx.bootstrap
    async with kafka_transactions.kafka_broker(bootstrap) as (servers, broker):
        results = await kafka_transactions.compare(servers, TRANSACTION_BATCHES, ctx.sizes.transaction_records)
    report.lines.append(f"kafka_transactions: on {broker}.")
    for c in results:
        current, transactional = c.current, c.transactional
        report.add(
            Figure(
                "kafka_transactions",
                f"transactional loop, batch {c.batch}",
                transactional.records_per_s,
                "records/s",
                "",
                c.throughput_ratio,
                "the current path",
                f"current {current.records_per_s:,.0f} records/s",
            ),
            Figure(
                "kafka_transactions",
                f"transactional cycle p50, batch {c.batch}",
                transactional.cycle_p50_ms,
                "ms",
                "",
                c.cycle_ratio,
                "the current path",
                f"current {current.cycle_p50_ms:.1f} ms",
            ),
            Figure(
                "kafka_transactions",
                f"transactional output visible p50, batch {c.batch}",
                transactional.visible_p50_ms,
                "ms",
                "",
                c.visible_ratio,
                "the current path (read_uncommitted)",
                f"current {current.visible_p50_ms:.1f} ms",
            ),
        )


async def rebalances(ctx: Context, report: Report) -> None:
    """Per membership setting: what rolling 2 agent-runner replicas cost; the baseline is the same
    run's probes before the roll."""
    if not ctx.sizes.rebalances:
        return
    for row in await rebalance_cost.measure_variants(list(rebalance_cost.VARIANTS)):
        variant = row["variant"]
        if row["cut"]:
            report.errors.append(f"rebalance_cost: {variant}: {row['cut']} long answers cut by the roll")
        before = float(row["probe p50 before s"])
        report.add(
            Figure("rebalance_cost", f"{variant}: rebalances in the roll", row["rebalances"], "generations"),
            Figure("rebalance_cost", f"{variant}: time rebalancing", row["rebalancing s"], "s"),
            Figure("rebalance_cost", f"{variant}: unowned partition-seconds", row["unowned partition-s"], "s"),
            Figure(
                "rebalance_cost",
                f"{variant}: longest probe wait in the roll",
                row["longest wait s"],
                "s",
                "",
                row["longest wait s"] / before if before > 0 else None,
                "probe p50 before the roll",
            ),
        )
