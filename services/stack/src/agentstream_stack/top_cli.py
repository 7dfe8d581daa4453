"""`agentstream top`: a live view of the stack from the services' /metrics."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer

from agentstream_stack.cli_errors import ExitCode
from agentstream_stack.cli_support import ConfigOpt, err, load_or_exit, out, running_stack


def top(
    config: ConfigOpt = None,
    url: Annotated[
        list[str] | None,
        typer.Option(help="SERVICE=URL of a service's HTTP port (repeatable); default: every service on http.* ports."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTSTREAM_METRICS_TOKEN",
            help="Bearer token for /metrics; default: the config's auth.metrics_token_env, then admin_token_env.",
        ),
    ] = None,
    interval: Annotated[float, typer.Option(min=0.05, help="Seconds between two scrapes.")] = 1.0,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one frame's figures as JSON and exit.")] = False,
) -> None:
    """Live view of the stack from the services' /metrics.

    Runs per second, active runs, lag, 429s, dead letters. q (or Ctrl-C) quits.
    """
    from agentstream.config import SERVICES
    from agentstream_stack.top import run_top  # rich Live and the parser only for this command

    settings = load_or_exit(config)
    host = "127.0.0.1" if settings.http.host in ("0.0.0.0", "::", "") else settings.http.host
    urls = {s: f"http://{host}:{settings.http.port_for(s)}" for s in SERVICES}
    # A running `agentstream up` here: its services, and the scrape token it left in its state folder.
    local = running_stack(config)
    if local and isinstance(local.get("services"), dict):
        urls = {str(name): str(where) for name, where in local["services"].items()}
    if url:
        urls = {}
        for item in url:
            service, sep, target = item.partition("=")
            if not sep or not target.startswith(("http://", "https://")):
                err.print(f"[red]--url {item!r}: expected SERVICE=http(s)://host:port[/]")
                raise typer.Exit(ExitCode.USAGE)
            urls[service] = target
    token = token or settings.auth.metrics_token() or settings.auth.admin_token()
    if token is None and local:
        from agentstream_stack.embedded_auth import read_metrics_token
        from agentstream_stack.state_dir import STATE_DIR

        token = read_metrics_token(STATE_DIR)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends the live view
        asyncio.run(run_top(urls, token, interval, once, as_json, out))
