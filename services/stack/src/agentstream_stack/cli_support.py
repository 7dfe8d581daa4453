"""What every `agentstream` sub-command shares: the consoles, `--config`, loading settings.

A module of its own so sub-apps (e.g. `runs_cli`) can use it without importing `cli`,
which imports them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from agentstream.config import ConfigError, SecurityProtocol, Settings, load_settings
from agentstream_stack.embedded import read_state

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (or AGENTSTREAM_CONFIG).", exists=False)
]
out = Console()
err = Console(stderr=True)


def load_or_exit(config: Path | None, **overrides: object) -> Settings:
    try:
        return load_settings(config, **overrides)
    except ConfigError as e:
        err.print(f"[red]{e}[/]")
        raise typer.Exit(2) from None


def client_settings(config: Path | None) -> Settings:
    """Config/env first; else the running `agentstream up` of this directory."""
    settings = load_or_exit(config)
    explicit = config or os.environ.get("AGENTSTREAM_CONFIG") or os.environ.get("AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS")
    state = read_state()
    if not explicit and state:
        kafka = settings.kafka.model_copy(
            update={
                "bootstrap_servers": state["kafka"],
                "embedded": True,
                "topic_prefix": state["topic_prefix"],
                "security_protocol": SecurityProtocol.PLAINTEXT,
            }
        )
        settings = settings.model_copy(update={"kafka": kafka})
    return settings


def masked(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
