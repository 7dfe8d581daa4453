"""How fast `agentstream --help` answers, next to a bare interpreter start in the same run.

Each figure is the median wall time of N fresh processes (default 9) after one warm-up (the OS
file cache), and their median CPU time (user + system): on a busy machine the wall time is mostly
waiting for a core, the CPU time is what the command costs. The baseline is `python -c pass` on the same interpreter; "whole runtime" is what
importing every command module costs, i.e. what `--help` cost before commands were imported
lazily. The target is `--help` under 0.5 s.

    uv run python -m bench.cli_startup            # text
    uv run python -m bench.cli_startup -n 21 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

TARGET_S = 0.5
CASES: dict[str, list[str]] = {
    "baseline: python -c pass": [sys.executable, "-c", "pass"],
    "agentstream --help": [sys.executable, "-m", "agentstream_stack", "--help"],
    "agentstream --version": [sys.executable, "-m", "agentstream_stack", "--version"],
    "whole runtime (every command imported)": [
        sys.executable,
        "-c",
        "import agentstream_stack.stack_cli, agentstream_stack.doctor, agentstream_stack.runs_cli,"
        " agentstream_stack.keys_cli, agentstream_stack.db_cli",
    ],
}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def medians_s(argv: list[str], n: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `argv`."""
    subprocess.run(argv, capture_output=True, check=True)  # warm-up
    walls, cpus = [], []
    for _ in range(n):
        t0, c0 = time.perf_counter(), _cpu_s()
        subprocess.run(argv, capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu_s() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=9, help="processes per case")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args()
    measured = {name: medians_s(argv, args.n) for name, argv in CASES.items()}
    figures = {name: wall for name, (wall, _) in measured.items()}
    baseline, help_s = figures["baseline: python -c pass"], figures["agentstream --help"]
    result = {
        "median_s": {k: round(v, 4) for k, v in figures.items()},
        "median_cpu_s": {k: round(cpu, 4) for k, (_, cpu) in measured.items()},
        "help_vs_baseline": round(help_s / baseline, 2),
        "help_under_target": help_s < TARGET_S,
        "target_s": TARGET_S,
        "n": args.n,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"CLI start-up: median of {args.n} fresh processes")
    print("-" * 60)
    print(f"{'':<42} {'wall':>8}     {'cpu':>6}")
    for name, (wall, cpu) in measured.items():
        print(f"{name:<42} {wall * 1000:5.0f} ms  {cpu * 1000:6.0f} ms  ({wall / baseline:5.1f}x baseline)")
    verdict = "under" if help_s < TARGET_S else "OVER"
    load = os.getloadavg()[0]
    print(
        f"agentstream --help is {verdict} the {TARGET_S} s target (load average {load:.1f} on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
