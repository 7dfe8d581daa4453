"""What every `agentstream` sub-command shares: the consoles, `--config`, `--json`, loading settings.

Imported by every command module, so it imports nothing heavy at its top (`agentstream --help`
loads no command module, but a command's own `--help` loads this one).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from agentstream_stack.cli_errors import ExitCode

if TYPE_CHECKING:
    from agentstream.config import Settings

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="YAML config file (or AGENTSTREAM_CONFIG).", exists=False)
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
out = Console()
err = Console(stderr=True, soft_wrap=True)  # an error stays one line, however narrow the terminal


def print_json(doc: Any) -> None:
    """One JSON document on stdout, the same shape every time (for scripts)."""
    typer.echo(json.dumps(doc, indent=2, default=str))


def load_or_exit(config: Path | None, **overrides: object) -> Settings:
    from agentstream.config import ConfigError, load_settings

    try:
        return load_settings(config, **overrides)
    except ConfigError as e:
        exit_on_config_error(e)


def exit_on_config_error(e: Exception) -> NoReturn:
    """A `ConfigError` as the CLI says it: the message naming the key, a hint, exit code 2."""
    err.print(f"[red]{escape(str(e))}[/]", highlight=False, soft_wrap=True)
    err.print("hint: docs/configuration.md describes every key", highlight=False, soft_wrap=True)
    raise typer.Exit(ExitCode.USAGE) from None


def config_path(config: Path | None) -> Path | None:
    """The config file a command reads: `--config`, else AGENTSTREAM_CONFIG, else none."""
    given = config or os.environ.get("AGENTSTREAM_CONFIG")
    return Path(given).resolve() if given else None


def running_stack(config: Path | None) -> dict[str, Any] | None:
    """The state of the `agentstream up` running in this directory, when it is the stack this command
    means: none named a broker (AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS), and the command reads the same
    config file as that `up` (or neither reads one)."""
    from agentstream_stack.embedded import read_state

    state = read_state()
    if state is None or os.environ.get("AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS"):
        return None
    file = config_path(config)
    return state if state.get("config") == (str(file) if file else None) else None


def client_settings(config: Path | None) -> Settings:
    """The running `agentstream up` of this directory started from the same config (or none); else
    config/env as they are."""
    from agentstream.config import KafkaFlavor, SecurityProtocol

    settings = load_or_exit(config)
    state = running_stack(config)
    if state:
        kafka = settings.kafka.model_copy(
            update={
                "bootstrap_servers": state["kafka"],
                "in_memory": True,
                "flavor": KafkaFlavor.TANSU,
                "topic_prefix": state["topic_prefix"],
                "security_protocol": SecurityProtocol.PLAINTEXT,
            }
        )
        settings = settings.model_copy(update={"kafka": kafka})
    return settings


def masked(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
