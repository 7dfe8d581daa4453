"""The sizes of each benchmark in each mode of `bench.all` (full, `--quick`, `--smoke`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    baseline_messages: int
    levels: tuple[int, ...]  # concurrent runs
    tokens: int  # per run
    token_rate: float
    min_runs: int
    long_tokens: int
    streams: tuple[int, ...]  # delivery: concurrent streams
    stream_seconds: float
    delta_rate: float
    ingress_messages: int
    tool_parallels: tuple[int, ...]
    tool_calls: int
    formatting_chars: int
    cli_processes: int
    http_requests: int = 0  # ingress over HTTP, per round and side (0: not in this mode)
    path_levels: tuple[int, ...] = (1,)  # message path: conversations at once
    path_runs: int = 2  # message path: runs per level at least
    path_databases: tuple[str, ...] = ("postgres",)
    # Streams per delivery core: levels searched from the first (doubling), or these levels only.
    capacity_first: int = 20
    capacity_levels: tuple[int, ...] = ()
    capacity_seconds: float = 8.0
    # Apache Kafka's own benchmarks (full mode only: minutes each, a JVM broker of their own on Tansu runs).
    transaction_records: int = 0  # per loop, at most (0: not in this mode)
    rebalances: bool = False  # every membership setting of `bench.rebalance_cost` rolled


SIZES = {
    "full": Sizes(
        2000,
        (1, 10, 50, 100, 200, 500),
        100,
        100.0,
        20,
        200,
        (5, 20, 50),
        8.0,
        20.0,
        5000,
        (1, 50),
        500,
        4000,
        9,
        600,
        (1, 20, 100),
        40,
        ("postgres", "sqlite"),
        transaction_records=2000,
        rebalances=True,
    ),  # fmt: skip
    "quick": Sizes(
        1000,
        (1, 20, 100),
        50,
        100.0,
        10,
        200,
        (5, 20),
        2.0,
        5.0,
        1000,
        (1, 10),
        100,
        4000,
        3,
        path_levels=(1, 20),
        path_runs=20,
        capacity_levels=(10, 40),
        capacity_seconds=4.0,
    ),
    "smoke": Sizes(
        30,
        (1, 3),
        5,
        200.0,
        2,
        40,
        (2, 3),
        0.6,
        5.0,
        40,
        (1, 2),
        5,
        400,
        1,
        capacity_levels=(2,),
        capacity_seconds=1.0,
    ),
}
