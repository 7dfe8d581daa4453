"""`debug_enabled`: whether ingress writes its per-run debug line, on both kinds of logger."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from agentstream.observability import configure_logging
from agentstream_ingress.app import debug_enabled
from agentstream_testing.logs import logging_restored


@pytest.fixture
def restore_logging() -> Iterator[None]:
    with logging_restored():
        yield


def test_a_configured_logger_answers_by_its_level(restore_logging: None) -> None:
    configure_logging("WARNING", json=False)
    assert not debug_enabled(structlog.get_logger("agentstream.ingress").bind(service="ingress"))
    configure_logging("DEBUG", json=False)
    assert debug_enabled(structlog.get_logger("agentstream.ingress").bind(service="ingress"))


def test_structlogs_own_logger_and_one_without_a_check_let_it_through(restore_logging: None) -> None:
    structlog.reset_defaults()
    assert debug_enabled(structlog.get_logger("x").bind(a=1))
    assert debug_enabled(object())
