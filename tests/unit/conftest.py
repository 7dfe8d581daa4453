"""Unit tests fail fast when they hang: a per-test timeout of a few seconds instead of the global one.

The global `timeout` in pyproject.toml (pytest-timeout) stays long for the integration, e2e and chaos
tests, which start brokers and processes. A unit test needs no I/O that slow, so one that has not
finished after `UNIT_TEST_TIMEOUT_S` is hung (a loop that never ends, an event never set): pytest-timeout
fails it there with the stack of where it hangs. A unit test that is legitimately slower says so with its
own `@pytest.mark.timeout(...)`, which wins over this default.

A property test (hypothesis) gets `PROPERTY_TEST_TIMEOUT_S`: its time is its examples times their cost,
and on a loaded 2-core machine that crossed 10 s with nothing hung (`test_parse_paths.py`'s link tests,
800 examples each, once at load ~9). Still a bound: a hang in one fails there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT_TEST_TIMEOUT_S = 10.0
PROPERTY_TEST_TIMEOUT_S = 120.0
UNIT_TESTS_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Conftest hooks see every collected item of the session, not only this directory's.
    for item in items:
        if item.path.is_relative_to(UNIT_TESTS_DIR) and item.get_closest_marker("timeout") is None:
            is_property = getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
            item.add_marker(pytest.mark.timeout(PROPERTY_TEST_TIMEOUT_S if is_property else UNIT_TEST_TIMEOUT_S))
