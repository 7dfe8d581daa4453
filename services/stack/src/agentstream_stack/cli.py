"""The `agentstream` command line: the root group and where each command lives.

Nothing here imports a command: `agentstream --help` lists the commands from `COMMANDS` and the
module of one command is imported when it runs (cli_lazy.py). To add a command, write its module
(a function, or a `typer.Typer` of sub-commands, importing the runtime inside its functions or in
a module of its own) and add one `LazyCommand` line below.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentstream_stack.cli_errors import ExitCode
from agentstream_stack.cli_lazy import LazyCommand, lazy_group

BROKER_DIED_EXIT = ExitCode.BROKER_DIED
PACKAGE = "agentstream-stack"  # the distribution whose version `--version` prints

COMMANDS: tuple[LazyCommand, ...] = (
    LazyCommand(
        "up",
        "agentstream_stack.stack_cli:up",
        "Start the embedded stack (broker, database, five services).",
    ),
    LazyCommand(
        "serve",
        "agentstream_stack.stack_cli:serve",
        "Run one service (docker-compose, Kubernetes, own processes).",
    ),
    LazyCommand(
        "send",
        "agentstream_stack.send_cli:send",
        "Send one message and print the streamed reply.",
    ),
    LazyCommand(
        "demo",
        "agentstream_stack.stack_cli:demo",
        "Run a scripted conversation on a throwaway embedded stack.",
    ),
    LazyCommand(
        "doctor",
        "agentstream_stack.doctor_cli:doctor",
        "Check Kafka, topics, database, connectors and platforms.",
    ),
    LazyCommand("top", "agentstream_stack.top_cli:top", "Live view of the stack from the services' /metrics."),
    LazyCommand("config", "agentstream_stack.config_cli:config_app", "The configuration: check a file."),
    LazyCommand("topics", "agentstream_stack.topics_cli:topics_app", "Kafka topics."),
    LazyCommand("db", "agentstream_stack.db_cli:db_app", "The database: migrations, retention purges."),
    LazyCommand("runs", "agentstream_stack.runs_cli:runs_app", "Stored runs: list, inspect, resume a failed one."),
    LazyCommand(
        "replay",
        "agentstream_stack.replay_cli:replay",
        "Show a finished run again on another chat or platform.",
    ),
    LazyCommand(
        "keys", "agentstream_stack.keys_cli:keys_app", "API keys for the HTTP endpoints (stored hashed; shown once)."
    ),
    LazyCommand(
        "pairing", "agentstream_stack.pairing_cli:pairing_app", "Pairing codes of unknown users (ingress authz)."
    ),
)

app = typer.Typer(
    cls=lazy_group(COMMANDS),
    help="agentstream: a Kafka-native runtime for AI agents. Every command and exit code: docs/cli.md",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: rich's costs most of a second to import
)


def version() -> str:
    from importlib.metadata import version as installed_version

    return f"agentstream {installed_version(PACKAGE)}"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version())
        raise typer.Exit()


@app.callback()
def root(
    _version: Annotated[
        bool,
        typer.Option("--version", "-V", help="Print the version and exit.", callback=_print_version, is_eager=True),
    ] = False,
) -> None:
    """The root's own options (`--version`); its help is the Typer's."""


def main() -> None:
    app()
