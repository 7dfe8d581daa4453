"""pytest fixtures shared by every test tree.

One broker per test session (a group join costs seconds, a broker start less than one):
the embedded Tansu, or Apache Kafka with ``AGENTSTREAM_TEST_BROKER=kafka`` (in Docker where a
Docker engine answers, else on the JVM: `agentstream_testing.brokers`); every test isolates itself with its own topic prefix,
hence its own topics and consumer groups. Databases: SQLite in a temp dir and PostgreSQL
(a fresh database per test on ``AGENTSTREAM_TEST_PG``, else the local server, else a
container where Docker is).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentstream.config import KafkaFlavor, Settings, load_settings
from agentstream.config.tools import DEFAULT_CALL_SECRET_ENV
from agentstream.kafka import EmbeddedBroker, create_topics
from agentstream_testing.brokers import (
    LOCAL_PG_URL,
    TEST_BOOTSTRAP_ENV,
    TEST_PG_ENV,
    apache_kafka,
    broker_description,
    broker_unavailable,
    docker_missing,
    flavor_under_test,
    kafka_on_jvm,
    postgres_in_docker,
)
from agentstream_testing.kafka_jvm import fetch_jars, jars_ready

GIVEN_PG_URL = os.environ.get(TEST_PG_ENV)

# Every test stack accepts this bootstrap admin token (`auth.admin_token_env`); services started as
# separate processes inherit the variable. Tests of the credentials themselves make real API keys.
ADMIN_TOKEN_ENV = "AGENTSTREAM_TEST_ADMIN_TOKEN"
ADMIN_TOKEN = os.environ.setdefault(ADMIN_TOKEN_ENV, f"test-admin-{uuid.uuid4().hex}")
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# Runners sign tool calls and executors verify them with the secret in `tools.call_secret_env`'s
# default variable: every test stack (and every service process it starts) shares this one.
TOOL_CALL_SECRET = os.environ.setdefault(DEFAULT_CALL_SECRET_ENV, f"test-tool-calls-{uuid.uuid4().hex}")


def _pg_answers(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return True
    except Exception:
        return False


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which broker the run uses, printed once (and why its tests skip, when they do)."""
    return [broker_description()]


_SKIPPED_WITHOUT_BROKER = pytest.StashKey[int]()


def pytest_sessionstart(session: pytest.Session) -> None:
    """Kafka on the JVM without its jars yet: fetched here, once, before any test (or xdist
    worker) starts, saying so; a failed fetch ends the run with Maven's reason."""
    if os.environ.get(TEST_BOOTSTRAP_ENV) or flavor_under_test() is not KafkaFlavor.KAFKA or jars_ready():
        return
    if broker_unavailable() is None and kafka_on_jvm():
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        fetch_jars(say=reporter.write_line if reporter else print)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without the broker asked for, its tests are left out here, said once by the report
    header, rather than each skipped with the same reason on its own line."""
    if broker_unavailable() is None:
        return
    left_out = [item for item in items if "kafka_bootstrap" in getattr(item, "fixturenames", ())]
    if left_out:
        items[:] = [item for item in items if "kafka_bootstrap" not in getattr(item, "fixturenames", ())]
        config.hook.pytest_deselected(items=left_out)
        config.stash[_SKIPPED_WITHOUT_BROKER] = len(left_out)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # A quiet run prints no header: the one line goes at the end instead.
    left_out = config.stash.get(_SKIPPED_WITHOUT_BROKER, 0)
    if left_out and (terminalreporter.verbosity < 0 or config.option.no_header):
        terminalreporter.write_line(f"{left_out} tests skipped: {broker_unavailable()}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Every test left out for want of the broker: a skip, not "no tests collected".
    if session.config.stash.get(_SKIPPED_WITHOUT_BROKER, 0) and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of the test broker: ``AGENTSTREAM_TEST_BOOTSTRAP``, Apache Kafka
    (``AGENTSTREAM_TEST_BROKER=kafka``: in Docker, else on the JVM, its logs in the session's
    temp dir, ``kafka0/node-1/kafka.log``) or an embedded Tansu."""
    external = os.environ.get(TEST_BOOTSTRAP_ENV)
    if external:
        yield external
        return
    if flavor_under_test() is KafkaFlavor.KAFKA:
        if reason := broker_unavailable():
            pytest.skip(reason)
        with apache_kafka(tmp_path_factory.mktemp("kafka")) as bootstrap:
            yield bootstrap
        return
    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def topic_prefix() -> str:
    return f"t{uuid.uuid4().hex[:10]}."


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str | None]:
    """An admin URL of a PostgreSQL server for the tests, or None when there is none:
    ``AGENTSTREAM_TEST_PG``, else the local server, else a container where Docker is."""
    if GIVEN_PG_URL:
        yield GIVEN_PG_URL if _pg_answers(GIVEN_PG_URL) else None
        return
    if _pg_answers(LOCAL_PG_URL):
        yield LOCAL_PG_URL
        return
    if docker_missing():
        yield None
        return
    with postgres_in_docker() as url:
        yield url


@pytest.fixture(scope="session")
def pg_available(pg_admin_url: str | None) -> bool:
    return pg_admin_url is not None


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path, pg_admin_url: str | None) -> Iterator[str]:
    """An empty, migrated-on-demand database URL on each engine."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'agentstream.db'}"
        return
    if pg_admin_url is None:
        where = GIVEN_PG_URL or f"{LOCAL_PG_URL} (and {docker_missing() or 'no container started'})"
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is not reachable at {where} (CI must start it)")
        pytest.skip(f"PostgreSQL not reachable at {where}")
    import psycopg

    name = f"as_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base = pg_admin_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    yield f"{base}/{name}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'agentstream.db'}"


def make_test_settings(bootstrap: str, prefix: str, db_url: str, **overrides: Any) -> Settings:
    flavor = flavor_under_test()
    kafka = {
        "bootstrap_servers": bootstrap,
        "topic_prefix": prefix,
        "in_memory": flavor is KafkaFlavor.TANSU,
        "flavor": flavor.value,
        "partitions": 2,
    }
    kafka.update(overrides.pop("kafka", {}))
    auth = {"admin_token_env": ADMIN_TOKEN_ENV, **overrides.pop("auth", {})}
    # A test's teardown is not a deploy: its services stop at once, cutting what runs, unless the
    # test is about the drain and sets a grace period.
    shutdown = {"grace_s": 0.0, **overrides.pop("shutdown", {})}
    return load_settings(kafka=kafka, database={"url": db_url}, auth=auth, shutdown=shutdown, **overrides)


def kafka_env(settings: Settings) -> dict[str, str]:
    """The test broker's settings as a service process's AGENTSTREAM__KAFKA__ variables."""
    kafka = settings.kafka
    return {
        "AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "AGENTSTREAM__KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
        "AGENTSTREAM__KAFKA__IN_MEMORY": str(kafka.in_memory).lower(),
        "AGENTSTREAM__KAFKA__FLAVOR": kafka.flavor.value,
        "AGENTSTREAM__KAFKA__PARTITIONS": str(kafka.partitions),
    }


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
