"""`agentstream doctor`: one verdict line per dependency of this configuration."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from agentstream_stack.cli_errors import ExitCode
from agentstream_stack.cli_support import ConfigOpt, JsonOpt, client_settings, out, print_json

STYLE = {"ok": "green", "fail": "red bold", "skip": "dim"}


def doctor(
    config: ConfigOpt = None,
    timeout: Annotated[float, typer.Option(help="Seconds each check may take.", min=0.1)] = 5.0,
    as_json: JsonOpt = False,
) -> None:
    """Check Kafka, topics, database, connectors and platforms.

    Kafka reachable, every topic there with its partitions, the database reachable and migrated to head,
    each model connector answering, each platform accepting its credential: one verdict line per check,
    exit 1 when any check fails.
    """
    from rich.markup import escape

    from agentstream_stack.doctor import Verdict, run_checks

    results = asyncio.run(run_checks(client_settings(config), timeout))
    failed = [r for r in results if r.verdict is Verdict.FAIL]
    if as_json:
        print_json({"ok": not failed, "checks": [r.as_dict() for r in results]})
    else:
        width = max(len(r.check) for r in results)
        for r in results:
            style = STYLE[r.verdict]
            out.print(
                f"[{style}]{r.verdict.value:<4}[/]  {escape(r.check):<{width}}  {escape(r.detail)}",
                highlight=False,
                soft_wrap=True,
            )
        out.print(
            f"[red bold]{len(failed)} of {len(results)} checks failed[/]"
            if failed
            else f"[green]all {len(results)} checks passed[/]",
            highlight=False,
        )
    if failed:
        raise typer.Exit(ExitCode.FAILED)
