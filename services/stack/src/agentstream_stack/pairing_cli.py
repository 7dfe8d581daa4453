"""`agentstream pairing approve`: let through a user who was given a pairing code."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from agentstream_stack.cli_errors import ExitCode
from agentstream_stack.cli_support import ConfigOpt, JsonOpt, err, load_or_exit, out, print_json

pairing_app = typer.Typer(no_args_is_help=True, add_completion=False)


@pairing_app.command("approve")
def pairing_approve(
    code: Annotated[str, typer.Argument(help="The code the user was given.")],
    platform: Annotated[str | None, typer.Option(help="Only accept a code issued on this platform.")] = None,
    as_json: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """Let the user who was given CODE through (5 wrong codes lock pairing for an hour)."""
    from agentstream_ingress.pairing import ApproveOutcome
    from agentstream_ingress.pairing_store import approve_with_settings

    result = asyncio.run(approve_with_settings(load_or_exit(config), code, platform))
    approved = result.outcome is ApproveOutcome.APPROVED
    if as_json:
        print_json({"outcome": result.outcome.value, "platform": result.platform, "user_id": result.user_id})
    elif approved:
        out.print(f"approved {result.platform} user {result.user_id}", highlight=False)
    else:
        err.print(f"[red]not approved: {result.outcome.value}[/]")
    if not approved:
        raise typer.Exit(ExitCode.FAILED)
