"""`agentstream config check FILE`: the effective configuration with credentials masked and the
named env vars reported, or exit 2 naming each invalid key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentstream_stack.cli import app
from agentstream_stack.cli_errors import ExitCode

GOOD = """\
kafka:
  partitions: 4
database:
  url: postgresql+psycopg://agent:hunter2hunter2@db:5432/agentstream
platforms:
  telegram:
    token_env: DOCTOR_TG_TOKEN
    api_url: http://127.0.0.1:9/tg
"""


def check(tmp_path: Path, text: str, *args: str, env: dict[str, str] | None = None) -> Result:
    file = tmp_path / "agentstream.yaml"
    file.write_text(text)
    return CliRunner().invoke(app, ["config", "check", *args, str(file)], env={"COLUMNS": "200", **(env or {})})


def test_a_valid_file_prints_the_effective_config_masked(tmp_path: Path) -> None:
    result = check(tmp_path, GOOD, env={"AGENTSTREAM__KAFKA__TOPIC_PREFIX": "fromenv.", "DOCTOR_TG_TOKEN": ""})
    assert result.exit_code == 0, result.output
    assert "valid" in result.output
    assert "hunter2hunter2" not in result.output and "agent:***@db:5432" in result.output
    assert "partitions: 4" in result.output  # from the file
    assert "topic_prefix: fromenv." in result.output  # the environment over it
    assert "log_level: INFO" in result.output  # and the defaults under it
    assert "env DOCTOR_TG_TOKEN (platforms.telegram.token_env): NOT set" in result.output


def test_json_has_the_config_and_which_env_vars_are_set(tmp_path: Path) -> None:
    result = check(tmp_path, GOOD, "--json", env={"DOCTOR_TG_TOKEN": "123:secret-token-value"})
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["valid"] is True
    assert doc["config"]["kafka"]["partitions"] == 4
    assert doc["config"]["database"]["url"] == "postgresql+psycopg://agent:***@db:5432/agentstream"
    assert doc["env"] == {
        "platforms.telegram.token_env": {"name": "DOCTOR_TG_TOKEN", "set": True},
        # Its variable has a default name; the tests' plugin sets it.
        "tools.call_secret_env": {"name": "AGENTSTREAM_TOOL_CALL_SECRET", "set": True},
    }
    assert "secret-token-value" not in result.output


@pytest.mark.parametrize(
    ("text", "key_path"),
    [
        ("kafka:\n  partitions: many\n", "kafka.partitions: Input should be a valid integer"),
        ("connectors:\n  - id: x\n    type: nope\n", "connectors.0.type: Input should be"),
        ("kafka:\n  partitons: 3\n", "kafka.partitons: Extra inputs are not permitted"),
        ("kafka:\n  partitions: [1\n", "(root): "),  # not YAML: the line instead of a parser traceback
        ("- a list\n", "(root): "),
    ],
)
def test_an_invalid_file_exits_2_naming_the_key(tmp_path: Path, text: str, key_path: str) -> None:
    result = check(tmp_path, text)
    assert result.exit_code == ExitCode.USAGE == 2
    assert key_path in result.output
    assert "Traceback" not in result.output


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    result = check(tmp_path, "kafka:\n  partitions: [1\n")
    assert "is not valid YAML" in result.output and "line 3" in result.output


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["config", "check", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "config file not found" in result.output
