"""`make setup` (under `make test` and `make run`) leaves the environment compiled to bytecode.

With PYTHONDONTWRITEBYTECODE set, as on CI machines, Python never caches what it compiles: every
service process, CLI command and test worker compiled all its imports again (~2 s of CPU each, half
of a five-process e2e test's CPU). Only checked under make, which set this environment up.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    "MAKELEVEL" not in os.environ, reason="the environment is compiled by `make setup`; this run is not under make"
)


@pytest.mark.parametrize(
    "module",
    [
        "sqlalchemy.engine.base",  # a dependency, compiled by uv as it installs
        "aiokafka.consumer.fetcher",
        "agentstream.config",  # the workspace's own sources (installed editable), compiled by make
        "agentstream_runner.app",
        "agentstream_stack.stack_cli",
    ],
)
def test_module_has_its_bytecode(module):
    source = importlib.import_module(module).__file__
    assert source is not None
    cached = Path(importlib.util.cache_from_source(source))
    assert cached.is_file(), f"{module}: no {cached} (was the environment set up by `make setup`?)"
