"""`agentstream db upgrade|purge`: the database's migrations, and every retention purge once.

The services purge on their own every `retention.interval_s` (unless `retention.enabled` is
false); `purge` runs the same purges — ingress's, delivery's, persistence's, in that order — now,
for operators and cron.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Annotated

import typer

from agentstream.config import Settings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.retention import PurgePlan, run_purges
from agentstream_delivery.retention import delivery_purges
from agentstream_ingress.retention import ingress_purges
from agentstream_persistence.retention import persistence_purges
from agentstream_stack.cli_support import ConfigOpt, err, load_or_exit, masked, out

db_app = typer.Typer(help="The database.", no_args_is_help=True)
# Ingress first: it forgets the run ids of idle conversations, which frees their runs for persistence's purge.
PLANS: tuple[PurgePlan, ...] = (ingress_purges, delivery_purges, persistence_purges)


async def purge_all(settings: Settings, dry_run: bool = False) -> dict[str, int]:
    """Run (or, dry, count) every purge the configuration enables; rows per table."""
    await upgrade(settings.database.url)
    engine = create_engine(settings.database.url)
    try:
        sessions = session_factory(engine)
        now = datetime.now(UTC)
        counts: dict[str, int] = {}
        for plan in PLANS:
            counts.update(await run_purges(sessions, plan(settings, now), settings.retention.batch_size, dry_run))
        return counts
    finally:
        await engine.dispose()


@db_app.command("upgrade")
def db_upgrade(config: ConfigOpt = None) -> None:
    """Apply every database migration (alembic upgrade head)."""
    settings = load_or_exit(config)
    asyncio.run(upgrade(settings.database.url))
    out.print(f"database at head: {masked(settings.database.url)}")


@db_app.command("purge")
def db_purge(
    config: ConfigOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count the rows due, delete nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Delete rows past their retention (`retention.*`) now, in batches; print the rows per table."""
    settings = load_or_exit(config)
    try:
        counts = asyncio.run(purge_all(settings, dry_run))
    except Exception as e:  # e.g. the database is unreachable: say so, exit non-zero
        err.print(f"[red]purge failed: {type(e).__name__}: {e}[/]")
        raise typer.Exit(1) from None
    if as_json:
        out.print_json(json.dumps({"dry_run": dry_run, "purged": counts}))
        return
    verb = "due" if dry_run else "purged"
    out.print(f"database {masked(settings.database.url)}" + (" (dry run: nothing deleted)" if dry_run else ""))
    if not counts:
        out.print("every retention is 0 (keep forever): nothing to purge")
    for table, n in counts.items():
        out.print(f"  {table:<22} {n:>10} {verb}")
