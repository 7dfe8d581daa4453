"""An unreachable broker or database ends a command with one line and a hint, and its own exit
code; any other exception keeps its traceback (a bug must show where it is)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from agentstream.db import create_engine
from agentstream_stack.cli import app
from agentstream_stack.cli_errors import ExitCode, explain


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on leaving: nothing listens there


def one_line_error(output: str) -> list[str]:
    lines = [line for line in output.splitlines() if line.strip()]
    assert "Traceback" not in output
    assert len(lines) == 2, lines
    assert lines[0].startswith("error: ") and lines[1].startswith("hint: ")
    return lines


def test_an_unreachable_broker_is_one_line_and_exit_4() -> None:
    env = {"AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{closed_port()}"}
    result = CliRunner().invoke(app, ["topics", "create"], env=env)
    assert result.exit_code == ExitCode.KAFKA_UNREACHABLE == 4
    error, hint = one_line_error(result.output)
    assert "kafka unreachable" in error and "kafka.bootstrap_servers" in hint


def test_an_unreachable_database_server_is_one_line_and_exit_5() -> None:
    url = f"postgresql+psycopg://agent:hunter2hunter2@127.0.0.1:{closed_port()}/agentstream"
    result = CliRunner().invoke(app, ["db", "upgrade"], env={"AGENTSTREAM__DATABASE__URL": url})
    assert result.exit_code == ExitCode.DATABASE_UNREACHABLE == 5
    error, hint = one_line_error(result.output)
    assert "database unreachable" in error and "database.url" in hint
    assert "hunter2hunter2" not in result.output


def test_a_database_path_that_cannot_exist_is_one_line_and_exit_5() -> None:
    url = "sqlite+aiosqlite:////proc/no-such-dir/agentstream.db"
    result = CliRunner().invoke(app, ["keys", "list"], env={"AGENTSTREAM__DATABASE__URL": url})
    assert result.exit_code == ExitCode.DATABASE_UNREACHABLE
    error, _ = one_line_error(result.output)
    assert "database unreachable" in error


def test_other_errors_are_not_outages() -> None:
    assert explain(ValueError("a bug")) is None
    assert explain(OSError("a file of the command itself")) is None  # no database or kafka frame
    try:
        try:
            raise ConnectionRefusedError("refused")
        except ConnectionRefusedError as e:
            raise RuntimeError("wrapped") from e
    except RuntimeError as wrapped:
        assert explain(wrapped) is None  # a refused connection of no known client: not ours to name


@pytest.mark.timeout(60)  # a fresh interpreter importing the Kafka client
def test_a_real_process_prints_only_the_two_lines() -> None:
    """No client library's log line around ours (logging's last-resort handler writes to stderr)."""
    env = {**os.environ, "AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS": f"127.0.0.1:{closed_port()}"}
    done = subprocess.run(
        [sys.executable, "-m", "agentstream_stack", "send", "hi"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == ExitCode.KAFKA_UNREACHABLE, done.stderr
    assert done.stdout == ""
    one_line_error(done.stderr)


async def test_a_statement_error_is_not_an_outage(tmp_path: Path) -> None:
    """SQLite says "no such table" with the same OperationalError class as "unable to open": only an
    error while connecting is the database being unreachable."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        with pytest.raises(OperationalError) as statement:
            async with engine.connect() as conn:
                await conn.execute(text("select * from no_such_table"))
    finally:
        await engine.dispose()
    assert explain(statement.value) is None


def test_runs_list_on_an_unreachable_database_is_the_one_line() -> None:
    url = f"postgresql+psycopg://agent:pw@127.0.0.1:{closed_port()}/agentstream"
    result = CliRunner().invoke(app, ["runs", "list"], env={"AGENTSTREAM__DATABASE__URL": url})
    assert result.exit_code == ExitCode.DATABASE_UNREACHABLE, result.output
    one_line_error(result.output)


def test_hints_name_the_command_as_the_caller_can_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `uv run`, `agentstream` alone is not on the caller's PATH: the hint says `uv run agentstream`."""
    from agentstream_stack.cli_errors import command_line, kafka_hint

    monkeypatch.setenv("UV_RUN_RECURSION_DEPTH", "1")
    assert command_line("db upgrade") == "uv run agentstream db upgrade"
    assert "`uv run agentstream doctor`" in kafka_hint()
    monkeypatch.delenv("UV_RUN_RECURSION_DEPTH")
    assert command_line("db upgrade") == "agentstream db upgrade"
    assert "`agentstream doctor`" in kafka_hint() and "uv run" not in kafka_hint()
