"""The root command group: commands imported only when they run, outages told in one line.

`agentstream --help` must answer at once, but the commands need the whole runtime (pydantic,
SQLAlchemy, aiokafka, the services). So the root group knows each command by a `LazyCommand`
— its name, where it lives, and the summary `--help` lists — and imports the module only when
that command (or its own `--help`) runs. A command module imports what it needs inside its
functions, or at its top when only that command pays for it.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperGroup

from agentstream_stack.cli_errors import ExitCode, explain, show_tracebacks


@dataclass(frozen=True)
class LazyCommand:
    """A command of `agentstream`: `target` is `module:attribute`, a `typer.Typer` (a group of
    sub-commands) or a function (one command; its docstring is its `--help`)."""

    name: str
    target: str
    summary: str  # the line `agentstream --help` shows; the first line of the command's own help

    def load(self) -> Any:
        module, _, attr = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attr)
        if isinstance(obj, typer.Typer):  # a group, even of one sub-command (`config check`)
            command: Any = typer.main.get_group(obj)
        else:
            single = typer.Typer(add_completion=False)
            single.command(self.name)(obj)
            command = typer.main.get_command(single)
        command.name = self.name
        _plain_help(command)
        if not command.help:
            command.help = self.summary
        return command


def _plain_help(command: Any) -> None:
    """Click's plain help for `command` and every sub-command, like the root's: one style (rich's
    boxes, and its `<bool>` beside every flag, in none), and rich's help costs a second to import."""
    command.rich_markup_mode = None
    for param in getattr(command, "params", []):
        if param.metavar is None and not getattr(param, "is_flag", False) and param.param_type_name == "option":
            # `--status [completed|failed]`, `--limit LIMIT`, not typer's `<list[…]>`, `<int range>`
            choices = re.search(r"[\w.-]+(?:\|[\w.-]+)+", str(param.display_type(None) or ""))
            param.metavar = f"[{choices.group(0)}]" if choices else param.name.upper()
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)


class LazyGroup(TyperGroup):
    """`lazy_commands` is set by `lazy_group`; the loaded commands are kept."""

    lazy_commands: dict[str, LazyCommand] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *self.lazy_commands]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """A placeholder with the summary for a command not loaded yet (`--help` lists it without importing it)."""
        if cmd_name in self.commands or cmd_name not in self.lazy_commands:
            return super().get_command(ctx, cmd_name)
        return TyperGroup(name=cmd_name, help=self.lazy_commands[cmd_name].summary)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else None
        if name in self.lazy_commands and name not in self.commands:
            self.add_command(self.lazy_commands[name].load(), name)
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        _quiet_logging()
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except KeyboardInterrupt:
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except Exception as e:
            outage = explain(e)
            if outage is None or show_tracebacks():
                raise
            print(f"error: {outage.message}\nhint: {outage.hint}", file=sys.stderr)
            raise typer.Exit(outage.code) from None


def _quiet_logging() -> None:
    """Until a command configures logging (`up`, `serve`), what libraries log stays out of its output.

    A client library's warning ("Unable connect to …") would reach stderr through logging's last-resort
    handler around our own one-line error, and structlog's default logger prints to stdout, into `--json`.
    A command reports its own outcome.
    """
    import structlog

    root_logger = logging.getLogger()
    if not root_logger.handlers:
        root_logger.addHandler(logging.NullHandler())
    if not structlog.is_configured():
        structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())


def lazy_group(commands: tuple[LazyCommand, ...]) -> type[LazyGroup]:
    """The root group class knowing `commands` (a class: typer builds the group from it)."""
    return type("AgentstreamGroup", (LazyGroup,), {"lazy_commands": {c.name: c for c in commands}})
