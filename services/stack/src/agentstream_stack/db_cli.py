"""`agentstream db upgrade|purge`: the database's migrations, and every retention purge once.

The services purge on their own every `retention.interval_s` (unless `retention.enabled` is
false); `purge` runs the same purges — ingress's, delivery's, persistence's, in that order — now,
for operators and cron.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Annotated

import typer

from agentstream.config import Settings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.session import current_revisions
from agentstream.retention import PurgePlan, run_purges
from agentstream_delivery.retention import delivery_purges
from agentstream_ingress.retention import ingress_purges
from agentstream_persistence.retention import persistence_purges
from agentstream_stack.cli_support import ConfigOpt, JsonOpt, load_or_exit, masked, out, print_json

db_app = typer.Typer(no_args_is_help=True, add_completion=False)
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
def db_upgrade(config: ConfigOpt = None, as_json: JsonOpt = False) -> None:
    """Apply every database migration (alembic upgrade head)."""
    settings = load_or_exit(config)
    asyncio.run(upgrade(settings.database.url))
    revisions = asyncio.run(asyncio.to_thread(current_revisions, settings.database.url))
    if as_json:
        print_json({"database": masked(settings.database.url), "revisions": revisions})
        return
    out.print(f"database at head ({', '.join(revisions)}): {masked(settings.database.url)}", highlight=False)


@db_app.command("purge")
def db_purge(
    config: ConfigOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count the rows due, delete nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete rows past their retention (`retention.*`) now, in batches; print the rows per table."""
    settings = load_or_exit(config)
    counts = asyncio.run(purge_all(settings, dry_run))  # an unreachable database: the root's one-line error
    if as_json:
        print_json({"dry_run": dry_run, "purged": counts})
        return
    verb = "due" if dry_run else "purged"
    out.print(f"database {masked(settings.database.url)}" + (" (dry run: nothing deleted)" if dry_run else ""))
    if not counts:
        out.print("every retention is 0 (keep forever): nothing to purge")
    for table, n in counts.items():
        out.print(f"  {table:<22} {n:>10} {verb}")
