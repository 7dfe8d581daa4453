"""pytest fixtures shared by every test tree.

One embedded broker per test session (a group join costs seconds, a broker start
less than one); every test isolates itself with its own topic prefix, hence its own
topics and consumer groups. Databases: SQLite in a temp dir and PostgreSQL (a fresh
database per test on ``AGENTSTREAM_TEST_PG``, default the local server).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentstream.config import Settings, load_settings
from agentstream.kafka import EmbeddedBroker, create_topics

PG_ADMIN_URL = os.environ.get("AGENTSTREAM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

# Every test stack accepts this bootstrap admin token (`auth.admin_token_env`); services started as
# separate processes inherit the variable. Tests of the credentials themselves make real API keys.
ADMIN_TOKEN_ENV = "AGENTSTREAM_TEST_ADMIN_TOKEN"
ADMIN_TOKEN = os.environ.setdefault(ADMIN_TOKEN_ENV, f"test-admin-{uuid.uuid4().hex}")
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers of the test broker: ``AGENTSTREAM_TEST_BOOTSTRAP`` or an embedded Tansu."""
    external = os.environ.get("AGENTSTREAM_TEST_BOOTSTRAP")
    if external:
        yield external
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def topic_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture(scope="session")
def pg_available() -> bool:
    return _pg_available()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, pg_available: bool) -> Iterator[str]:
    """An empty, migrated-on-demand database URL on each engine."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'agentstream.db'}"
        return
    if not pg_available:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not reachable at {PG_ADMIN_URL} (CI must start it)")
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}")
    import psycopg

    name = f"as_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    yield f"{base}/{name}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'agentstream.db'}"


def make_test_settings(bootstrap: str, prefix: str, db_url: str, **overrides: Any) -> Settings:
    kafka = {"bootstrap_servers": bootstrap, "topic_prefix": prefix, "embedded": True, "partitions": 2}
    kafka.update(overrides.pop("kafka", {}))
    auth = {"admin_token_env": ADMIN_TOKEN_ENV, **overrides.pop("auth", {})}
    return load_settings(kafka=kafka, database={"url": db_url}, auth=auth, **overrides)


@pytest.fixture
def settings_factory(kafka_bootstrap: str, topic_prefix: str, sqlite_url: str) -> Callable[..., Settings]:
    """Build settings for this test's broker and prefix; pass ``db_url=`` to change the database."""

    def factory(db_url: str | None = None, **overrides: Any) -> Settings:
        return make_test_settings(kafka_bootstrap, topic_prefix, db_url or sqlite_url, **overrides)

    return factory


@pytest.fixture
async def topics_created(kafka_bootstrap: str, topic_prefix: str) -> AsyncIterator[str]:
    """Creates this test's topics; yields the prefix."""
    settings = make_test_settings(kafka_bootstrap, topic_prefix, "sqlite+aiosqlite:///:memory:")
    await create_topics(settings.kafka)
    yield topic_prefix


def authed_app() -> Any:
    """A bare FastAPI app whose routes accept `ADMIN_HEADERS` (for testing one service's routes alone)."""
    from fastapi import FastAPI

    from agentstream.auth import Authenticator

    app = FastAPI()
    app.state.auth = Authenticator(
        load_settings(auth={"admin_token_env": ADMIN_TOKEN_ENV}).auth, "sqlite+aiosqlite:///:memory:"
    )
    return app
