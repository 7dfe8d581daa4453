"""Logging configured by a test, undone after it: `configure_logging` changes process-wide state."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

import structlog

from agentstream.observability import QUIET_LOGGERS


@contextlib.contextmanager
def logging_restored() -> Iterator[None]:
    """The root logger's handlers and level, the quiet loggers' levels and structlog's defaults as they were
    before; the handlers added meanwhile are closed (a log file's handle among them)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in QUIET_LOGGERS}
    try:
        yield
    finally:
        for handler in root.handlers:
            if handler not in handlers:
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, value in levels.items():
            logging.getLogger(name).setLevel(value)
        structlog.reset_defaults()
