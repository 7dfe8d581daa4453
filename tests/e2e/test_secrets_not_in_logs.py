"""Secrets never in logs: five `agentstream serve` processes at DEBUG with known secrets, one Telegram
message answered through the fake Bot API and the fake OpenAI server, then every service's log is searched.

The secrets are really in use (the fakes check the bot token and see the API key), so a leak would
show; the logs must be non-empty and show at least one masked Telegram URL, so the test cannot pass
by logging nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from agentstream.config import SERVICES
from agentstream.kafka import create_topics, free_port
from agentstream.secrets_mask import MASK
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms.telegram import FakeTelegram
from agentstream_testing.fixtures import make_test_settings
from tests.e2e.processes import spawn, stop

BOT_ID = "987654321"
BOT_SECRET = "AAHs3cr3tB0tT0k3nZx81Qw72Er63Ty54Ui"
BOT_TOKEN = f"{BOT_ID}:{BOT_SECRET}"
WEBHOOK_SECRET = "tg-webhook-secret-5f1e2d9c"
CONNECTOR_KEY = "fake-openai-key-7a6b5c4d3e2f"
DB_PASSWORD = "db-pass-8c7d6e5f"
ANSWER = "Hello from the fake model."
CHAT = "777"


@pytest.fixture
def database(tmp_path: Path, pg_admin_url: str | None) -> Iterator[tuple[str, list[str]]]:
    """(url, secrets in it): PostgreSQL with a password in the URL when available (trust auth ignores it)."""
    if pg_admin_url is None:
        yield f"sqlite+aiosqlite:///{tmp_path / 'secrets.db'}", []
        return
    import psycopg

    name = f"as_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(pg_admin_url).set(drivername="postgresql+psycopg", password=DB_PASSWORD, database=name)
    yield url.render_as_string(hide_password=False), [DB_PASSWORD]
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def wait_ready(ports: dict[str, int], procs: dict[str, object], logs: Path) -> None:
    async with httpx.AsyncClient(timeout=5) as http, asyncio.timeout(90):
        for name, port in ports.items():
            while True:
                assert procs[name].poll() is None, (logs / f"{name}.log").read_text()  # type: ignore[attr-defined]
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)


async def test_no_service_logs_a_configured_secret(kafka_bootstrap, topic_prefix, tmp_path, database):
    db_url, db_secrets = database
    settings = make_test_settings(kafka_bootstrap, topic_prefix, db_url)
    await create_topics(settings.kafka)
    async with FakeTelegram(token=BOT_TOKEN) as telegram, FakeOpenAI() as model:
        model.add_turn(text=ANSWER)
        config = {
            "kafka": {
                "bootstrap_servers": kafka_bootstrap,
                "topic_prefix": topic_prefix,
                "in_memory": settings.kafka.in_memory,
                "flavor": settings.kafka.flavor.value,
                "partitions": settings.kafka.partitions,
            },
            "database": {"url": db_url},
            "log_level": "DEBUG",
            "connectors": [
                {
                    "id": "fake",
                    "type": "openai",
                    "base_url": model.base_url,
                    "model": "fake-model",
                    "api_key_env": "TEST_CONNECTOR_KEY",
                }
            ],
            "platforms": {"telegram": {"token_env": "TEST_TG_TOKEN", "api_url": telegram.url}},
            "ingress": {"webhooks": {"telegram": {"main": {"secret_env": "TEST_TG_WEBHOOK_SECRET"}}}},
            "authz": {"platforms": {"telegram": {"users": [CHAT]}}},
        }
        config_file = tmp_path / "agentstream.yaml"
        config_file.write_text(json.dumps(config))  # JSON is YAML
        env = {
            "AGENTSTREAM_CONFIG": str(config_file),
            "TEST_TG_TOKEN": BOT_TOKEN,
            "TEST_TG_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "TEST_CONNECTOR_KEY": CONNECTOR_KEY,
        }
        ports = {name: free_port() for name in SERVICES}
        procs = {
            name: spawn(["serve", name, "--port", str(ports[name])], env, tmp_path, tmp_path / f"{name}.log")
            for name in SERVICES
        }
        try:
            await wait_ready(ports, procs, tmp_path)
            update = {
                "update_id": 1,
                "message": {
                    "message_id": 1,
                    "date": int(time.time()),
                    "text": "hi there",
                    "from": {"id": int(CHAT), "is_bot": False, "first_name": "Tess"},
                    "chat": {"id": int(CHAT), "type": "private"},
                },
            }
            async with httpx.AsyncClient(timeout=10) as http:
                r = await http.post(
                    f"http://127.0.0.1:{ports['ingress']}/webhooks/telegram/main",
                    json=update,
                    headers={"X-Telegram-Bot-Api-Secret-Token": WEBHOOK_SECRET},
                )
                assert r.status_code == 202, r.text
            async with asyncio.timeout(60):
                while ANSWER not in telegram.texts(CHAT):  # noqa: ASYNC110 - the fake records, it does not signal
                    await asyncio.sleep(0.1)
            # The secrets were really used: a leak would have had something to leak.
            assert model.requests and model.requests[0].headers.get("authorization") == f"Bearer {CONNECTOR_KEY}"
            assert telegram.count(401) == 0 and telegram.count(200) >= 1
        finally:
            codes = {name: stop(p) for name, p in procs.items()}
    assert all(code == 0 for code in codes.values()), codes

    logs = {name: (tmp_path / f"{name}.log").read_text() for name in SERVICES}
    for name, text in logs.items():
        assert len(text.splitlines()) >= 3, f"{name} logged almost nothing: {text!r}"
    secrets = [BOT_TOKEN, BOT_SECRET, WEBHOOK_SECRET, CONNECTOR_KEY, *db_secrets]
    leaks = {(name, s): text.count(s) for name, text in logs.items() for s in secrets if s in text}
    assert leaks == {}
    # Not vacuous: the Telegram API URL was logged, with its token masked.
    assert f"/bot{BOT_ID}:{MASK}" in logs["delivery"]
