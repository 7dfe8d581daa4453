"""`agentstream doctor` against the embedded broker, SQLite, the fake OpenAI server and a fake
Telegram: every check passes on a good setup, and each broken part fails its own line. Also
`topics create --json`, which doctor's hint points to."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from agentstream.db import upgrade
from agentstream.kafka.topics import TOPIC_NAMES
from agentstream_stack.cli import app
from agentstream_stack.cli_errors import ExitCode
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeTelegram

pytestmark = pytest.mark.integration

TOKEN_ENV = "DOCTOR_IT_TELEGRAM_TOKEN"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_file(tmp_path: Path, bootstrap: str, prefix: str, db_url: str, model_url: str, tg_url: str) -> Path:
    doc: dict[str, Any] = {
        "kafka": {"bootstrap_servers": bootstrap, "topic_prefix": prefix, "in_memory": True, "partitions": 2},
        "database": {"url": db_url},
        "connectors": [{"id": "local", "type": "openai", "base_url": model_url, "model": "fake-model"}],
        "platforms": {"telegram": {"api_url": tg_url, "token_env": TOKEN_ENV}},
    }
    path = tmp_path / f"doctor-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


async def cli(*args: str, token: str = "123:TEST") -> Result:
    env = {"COLUMNS": "200", TOKEN_ENV: token}
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env)


def verdicts(result: Result) -> dict[str, str]:
    return {c["check"]: c["verdict"] for c in json.loads(result.output)["checks"]}


async def test_a_good_setup_passes_every_check(
    tmp_path: Path, kafka_bootstrap: str, topics_created: str, sqlite_url: str
) -> None:
    await upgrade(sqlite_url)
    async with FakeOpenAI() as model, FakeTelegram() as tg:
        config = config_file(tmp_path, kafka_bootstrap, topics_created, sqlite_url, model.base_url, tg.url)
        as_json = await cli("doctor", "--json", "--config", str(config))
        text = await cli("doctor", "--config", str(config))
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output)["ok"] is True
    assert verdicts(as_json) == {
        "kafka": "ok",
        "topics": "ok",
        "database": "ok",
        "connector local": "ok",
        "platform telegram": "ok",
    }
    assert text.exit_code == 0
    lines = text.output.strip().splitlines()
    assert len(lines) == 6 and all(line.startswith("ok ") for line in lines[:5]), lines
    assert "all 5 checks passed" in lines[-1]


async def test_each_broken_part_fails_its_own_line(tmp_path: Path, kafka_bootstrap: str) -> None:
    fresh_prefix = f"doctor-{uuid.uuid4().hex[:8]}."  # no topics under it
    never_migrated = f"sqlite+aiosqlite:///{tmp_path / 'never.db'}"
    dead_model = f"http://127.0.0.1:{closed_port()}/v1"
    async with FakeTelegram() as tg:
        config = config_file(tmp_path, kafka_bootstrap, fresh_prefix, never_migrated, dead_model, tg.url)
        result = await cli("doctor", "--json", "--timeout", "3", "--config", str(config), token="123:WRONG")
    assert result.exit_code == ExitCode.FAILED, result.output
    assert verdicts(result) == {
        "kafka": "ok",
        "topics": "fail",
        "database": "fail",
        "connector local": "fail",
        "platform telegram": "fail",
    }
    details = {c["check"]: c["detail"] for c in json.loads(result.output)["checks"]}
    assert f"{fresh_prefix}inbound" in details["topics"] and "agentstream topics create" in details["topics"]
    assert "no database at" in details["database"]
    assert "ConnectError" in details["connector local"]
    assert "refused the token" in details["platform telegram"]
    assert not (tmp_path / "never.db").exists()  # looking created nothing


async def test_an_unreachable_broker_fails_kafka_and_skips_topics(tmp_path: Path, sqlite_url: str) -> None:
    await upgrade(sqlite_url)
    async with FakeOpenAI() as model, FakeTelegram() as tg:
        config = config_file(tmp_path, f"127.0.0.1:{closed_port()}", "x.", sqlite_url, model.base_url, tg.url)
        result = await cli("doctor", "--config", str(config), "--timeout", "3")
    assert result.exit_code == ExitCode.FAILED
    lines = {line.split()[1]: line.split()[0] for line in result.output.strip().splitlines()[:-1]}
    assert lines["kafka"] == "fail" and lines["topics"] == "skip" and lines["database"] == "ok"


async def test_topics_create_prints_the_same_shape_every_time(tmp_path: Path, kafka_bootstrap: str) -> None:
    prefix = f"create-{uuid.uuid4().hex[:8]}."
    env_args = ("--config", str(config_file(tmp_path, kafka_bootstrap, prefix, "sqlite://", "http://x", "http://x")))
    first = await cli("topics", "create", "--json", *env_args)
    again = await cli("topics", "create", "--json", *env_args)
    assert first.exit_code == again.exit_code == 0, first.output
    assert json.loads(first.output) == {
        "created": [f"{prefix}{t}" for t in TOPIC_NAMES],
        "prefix": prefix,
        "partitions": 2,
    }
    assert json.loads(again.output)["created"] == []
    text = await cli("topics", "create", *env_args)
    assert "every topic existed already" in text.output


@pytest.fixture(autouse=True)
def _no_running_stack_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no `.agentstream` state of a running `up` here
