"""A PostgreSQL outage under persistence (a separate process), through a TCP proxy the test cuts.

Runs that finish while the database is away stay buffered (their offsets held) and are
retried with backoff; `/readyz` says why it is not ready; once the database is back every
run is stored exactly once, no buffer is left open and readiness recovers.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from agentstream.kafka import create_topics, free_port
from agentstream_testing.fixtures import ADMIN_HEADERS, make_test_settings
from agentstream_testing.tcp_proxy import TcpProxy
from tests.chaos.processes import ServiceProcess, service_env
from tests.integration.persistence.test_app import KEY, publish, run_events

pytestmark = pytest.mark.chaos

OUTAGE_S = 5.0


def pg_database(admin_url: str) -> tuple[str, str]:
    """A fresh database: (its name, its libpq URL straight to the server)."""
    name = f"as_chaos_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, f"{admin_url.rsplit('/', 1)[0]}/{name}"


def stored(direct_url: str) -> tuple[list[str], int]:
    with psycopg.connect(direct_url) as conn:
        runs = [r[0] for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()
    return runs, int(messages[0]) if messages else 0


def open_buffers(metrics: str) -> float:
    found = re.search(r"^agentstream_persistence_open_buffers (\S+)$", metrics, re.MULTILINE)
    assert found, metrics
    return float(found.group(1))


async def test_database_outage_is_retried_until_every_run_is_stored(
    kafka_bootstrap, topic_prefix, pg_admin_url, tmp_path
):
    if pg_admin_url is None:
        pytest.skip("PostgreSQL not reachable")
    name, direct = pg_database(pg_admin_url)
    server = make_url(pg_admin_url)
    proxy = await TcpProxy(server.host or "127.0.0.1", server.port or 5432).start()
    db = f"postgresql+psycopg://postgres@127.0.0.1:{proxy.port}/{name}"
    settings = make_test_settings(kafka_bootstrap, topic_prefix, db)
    await create_topics(settings.kafka)
    http_port = free_port()
    persistence = ServiceProcess("persistence", service_env(settings), http_port, tmp_path, "outage")
    try:
        await persistence.start()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{http_port}", headers=ADMIN_HEADERS, timeout=5
        ) as http:
            proxy.cut()
            cut_at = time.monotonic()
            await publish(settings, run_events("outage-1", "first?", "one") + run_events("outage-2", "second?", "two"))

            # Not ready, and saying why, while the flushes fail.
            async with asyncio.timeout(30):
                while True:
                    ready = await http.get("/readyz")
                    if ready.status_code == 503 and "flush" in ready.json()["reasons"]:
                        break
                    await asyncio.sleep(0.2)
            assert "not stored yet, retrying" in ready.json()["reasons"]["flush"]
            assert open_buffers((await http.get("/metrics")).text) == 2  # both runs held, neither lost

            await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - cut_at)))
            proxy.restore()

            async with asyncio.timeout(30):
                while True:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                    await asyncio.sleep(0.2)
            runs, messages = stored(direct)
            assert runs == ["outage-1", "outage-2"]
            assert messages == 8  # user, tool, two assistant messages per run: each once
            assert open_buffers((await http.get("/metrics")).text) == 0
            run = (await http.get("/v1/runs/outage-2")).json()
            assert (run["status"], run["text"], run["conversation_key"]) == ("completed", "two", KEY)
    finally:
        persistence.stop()
        await proxy.close()
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    log = persistence.log.read_text()
    retries = log.count("flush failed; retrying")
    # Backed off, not hammered: 0.2 s doubling to 5 s gives a handful of attempts in 5 s.
    assert 1 <= retries <= 15, retries
