"""The root command: `--help` lists every command without importing the runtime, `--version`, and
each registered command loads from where the registry says, with the summary the root lists."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from agentstream_stack.cli import COMMANDS, PACKAGE, app
from agentstream_stack.cli_lazy import LazyCommand, lazy_group

HEAVY = ("aiokafka", "sqlalchemy", "faststream", "openai", "anthropic", "pydantic", "alembic", "httpx", "fastapi")
# A fresh interpreter: what `agentstream --help` imports, printed as JSON after the help.
PROBE = """
import json, sys
sys.argv = ["agentstream", "--help"]
from agentstream_stack.cli import main
try:
    main()
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.mark.timeout(60)  # a fresh interpreter on a busy machine
def test_help_lists_every_command_and_imports_nothing_heavy() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=False)
    help_text, _, last = done.stdout.rstrip().rpartition("\n")
    probe = json.loads(last)
    assert probe["code"] == 0, done.stderr
    for command in COMMANDS:
        assert f"  {command.name} " in help_text and command.summary in help_text
    loaded = {m.split(".")[0] for m in probe["modules"]}
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    assert not any(m.startswith(("agentstream.", "agentstream_")) and "stack" not in m for m in probe["modules"])
    assert "agentstream_stack.stack_cli" not in probe["modules"]  # no command module either


# What `agentstream send` imports: a Kafka client's parts, none of a service's.
SEND_PROBE = """
import json, sys
import agentstream_stack.send_cli
print(json.dumps(sorted(sys.modules)))
"""
SERVICE_SIDE = ("sqlalchemy", "fastapi", "alembic", "uvicorn", "openai", "anthropic", "starlette")


@pytest.mark.timeout(60)  # a fresh interpreter on a busy machine
def test_send_imports_a_kafka_client_and_no_service() -> None:
    done = subprocess.run([sys.executable, "-c", SEND_PROBE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.rstrip().rpartition("\n")[2])
    loaded = {m.split(".")[0] for m in modules}
    assert "aiokafka" in loaded
    assert not loaded & set(SERVICE_SIDE), loaded & set(SERVICE_SIDE)
    assert not {"agentstream.kafka.broker", "agentstream.kafka.embedded", "agentstream.observability"} & set(modules)
    assert not any(m.startswith(("agentstream_runner", "agentstream_delivery", "agentstream_ingress")) for m in modules)


def test_version_prints_the_installed_version() -> None:
    for flag in ("--version", "-V"):
        result = CliRunner().invoke(app, [flag])
        assert result.exit_code == 0
        assert result.output.strip() == f"agentstream {version(PACKAGE)}"


@pytest.mark.timeout(60)  # imports every command module, the whole runtime
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_command_loads_with_the_summary_the_root_lists(command: LazyCommand) -> None:
    loaded = command.load()
    assert loaded.name == command.name
    assert (loaded.help or "").strip().splitlines()[0] == command.summary
    result = CliRunner().invoke(app, [command.name, "--help"])
    assert result.exit_code == 0 and command.summary in " ".join(result.output.split())


def greet(name: str = "world") -> None:
    """Say hello."""
    typer.echo(f"hello {name}")


def test_a_command_is_one_function_and_one_registration() -> None:
    extra = LazyCommand("greet", f"{__name__}:greet", "Say hello.")
    root = typer.Typer(cls=lazy_group((extra,)), rich_markup_mode=None)

    @root.callback()
    def _root() -> None:
        """A root like agentstream's."""

    listed = CliRunner().invoke(root, ["--help"])
    assert listed.exit_code == 0 and "greet" in listed.output and "Say hello." in listed.output
    ran = CliRunner().invoke(root, ["greet", "--name", "you"])
    assert ran.exit_code == 0 and ran.output == "hello you\n"
    unknown = CliRunner().invoke(root, ["gret"])
    assert unknown.exit_code == 2 and "No such command" in unknown.output


def noisy() -> None:
    """Log as the libraries do, then print data."""
    import logging

    import structlog

    logging.getLogger("aiokafka").warning("Unable connect to somewhere")
    structlog.get_logger().warning("kafka flavor not detected")
    typer.echo('{"data": 1}')


NOISY = """
import sys, typer
from agentstream_stack.cli_lazy import LazyCommand, lazy_group
root = typer.Typer(cls=lazy_group((LazyCommand("noisy", "tests.unit.stack.test_cli:noisy", "Log, then print."),)))
root.callback()(lambda: None)
sys.argv = ["agentstream", "noisy"]
root()
"""


@pytest.mark.timeout(60)  # a fresh interpreter
def test_what_libraries_log_stays_out_of_a_commands_output() -> None:
    done = subprocess.run([sys.executable, "-c", NOISY], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"data": 1}\n'
    assert done.stderr == ""


def _every_command_path() -> list[list[str]]:
    """Every command and sub-command, by the words that run it (`["runs", "list"]`)."""
    paths: list[list[str]] = []
    for command in COMMANDS:
        loaded = command.load()
        subs = getattr(loaded, "commands", {})
        paths += [[command.name, sub] for sub in subs] if subs else [[command.name]]
    return paths


def test_every_help_is_one_plain_style_without_type_tags() -> None:
    """One help style everywhere (click's plain text, as the root's), flags without `<bool>` and
    options named by what they take (`--limit LIMIT`, `--status [completed|failed|…]`)."""
    paths = _every_command_path()
    assert ["runs", "list"] in paths and ["send"] in paths
    for path in paths:
        result = CliRunner().invoke(app, [*path, "--help"], terminal_width=80)
        assert result.exit_code == 0, (path, result.output)
        assert result.output.startswith("Usage: ") and f" {' '.join(path)} " in result.output.splitlines()[0]
        assert not set("╭╮╰╯│─") & set(result.output), (path, result.output)
        option_lines = [line for line in result.output.splitlines() if line.lstrip().startswith("-")]
        assert not [line for line in option_lines if "<" in line.split("  ")[0]], (path, result.output)
