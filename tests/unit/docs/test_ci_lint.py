"""CI lints before it tests: `.ci/run` calls `make lint` before `make test`, and the Makefile's
lint target runs ruff's linter, ruff's format check and mypy (strict on libs/agentstream; on services and bench)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def ci_commands() -> list[str]:
    """The `.ci/run` lines that run something (comments and blank lines dropped)."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_ci_runs_lint_before_the_suite():
    commands = ci_commands()
    assert "make lint" in commands and "make test" in commands
    assert commands.index("make lint") < commands.index("make test")


def test_ci_runs_the_mutation_smoke_between_lint_and_the_suite():
    commands = ci_commands()
    assert commands.index("make lint") < commands.index("make mutate-smoke") < commands.index("make test")


@pytest.fixture(scope="module")
def lint_recipe() -> list[str]:
    """What `make lint` would run (a dry run: nothing is executed)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(
        ["make", "-n", "lint", "UV=uv"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    "command",
    [
        r"uv run ruff check \.$",
        r"uv run ruff format --check \.$",
        r"uv run mypy --strict libs/agentstream/src\b",
        r"for p in services/\*/src; do uv run mypy \$p \|\| exit 1; done",
        r"uv run mypy bench$",
    ],
)
def test_lint_target_runs(lint_recipe: list[str], command: str):
    assert any(re.search(command, line) for line in lint_recipe), f"make lint does not run {command!r}"


def test_lint_type_checks_the_typing_examples(lint_recipe: list[str]):
    strict = next(line for line in lint_recipe if "mypy --strict" in line)
    assert "tests/typing" in strict.split()


def test_lint_type_checks_the_test_support_package(lint_recipe: list[str]):
    strict = next(line for line in lint_recipe if "mypy --strict" in line)
    assert "libs/agentstream-testing/src" in strict.split()
