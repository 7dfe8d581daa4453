"""docs/cli.md names every command the root registers and every exit code with its number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentstream_stack.cli import COMMANDS
from agentstream_stack.cli_errors import ExitCode
from agentstream_stack.cli_lazy import LazyCommand

DOC = (Path(__file__).parents[3] / "docs" / "cli.md").read_text()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_command_has_a_row(command: LazyCommand) -> None:
    assert re.search(rf"^\| `{re.escape(command.name)}\b", DOC, re.MULTILINE), command.name


@pytest.mark.parametrize("code", list(ExitCode), ids=lambda c: c.name)
def test_every_exit_code_is_in_the_table(code: ExitCode) -> None:
    assert f"| {int(code)} | `{code.name}` |" in DOC


def test_the_table_has_no_code_the_cli_does_not_use() -> None:
    documented = {int(n) for n in re.findall(r"^\| (\d+) \| `[A-Z_]+` \|", DOC, re.MULTILINE)}
    assert documented == {int(c) for c in ExitCode}
