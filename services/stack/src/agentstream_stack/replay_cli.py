"""`agentstream replay RUN_ID --to TARGET`: a finished run shown again, on another chat or platform."""

from __future__ import annotations

from typing import Annotated

import typer

from agentstream_stack.cli_support import ConfigOpt, JsonOpt, client_settings, err, out, print_json


def replay(
    run_id: Annotated[str, typer.Argument(help="The stored run (its id, or the start of it).")],
    to: Annotated[
        str, typer.Option("--to", help="console, web (a new web chat), or PLATFORM:CHAT[:THREAD], e.g. telegram:42.")
    ],
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Show a finished run again on another chat or platform."""
    import asyncio

    from rich.markup import escape

    from agentstream.contracts import new_id
    from agentstream_stack.cli_errors import ExitCode, explain
    from agentstream_stack.replay import BadTarget, ReplayError, load_replay, parse_target, publish_replay
    from agentstream_stack.runs_store import RunsUnavailable

    replay_id = new_id()
    try:
        target = parse_target(to, replay_id)
    except BadTarget as e:
        err.print(f"[red]{escape(str(e))}[/]", highlight=False)
        raise typer.Exit(ExitCode.USAGE) from None
    settings = client_settings(config)
    try:
        plan = asyncio.run(load_replay(settings.database.url, run_id, target, replay_id))
    except (ReplayError, RunsUnavailable) as e:
        if e.__cause__ is not None and explain(e.__cause__) is not None:
            raise e.__cause__ from None  # the database is not there: the root's one line
        err.print(f"[red]{escape(str(e))}[/]", highlight=False)
        raise typer.Exit(ExitCode.FAILED) from None
    asyncio.run(publish_replay(settings.kafka, plan))
    doc = {
        "replay_id": plan.replay_id,
        "replay_of": plan.replay_of,
        "target": target.model_dump(mode="json", exclude_none=True),
        "events": len(plan.events),
    }
    if as_json:
        print_json(doc)
        return
    where = ":".join(p for p in (target.platform, target.chat_id, target.thread_id) if p)
    out.print(
        f"replay [bold]{escape(plan.replay_id)}[/] of run {escape(plan.replay_of)} → {escape(where)} "
        f"({len(plan.events)} events; delivery shows it)",
        highlight=False,
    )
