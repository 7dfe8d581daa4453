"""Unit tests get a short per-test timeout (tests/unit/conftest.py): a hang fails fast and says where."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.conftest import PROPERTY_TEST_TIMEOUT_S, UNIT_TEST_TIMEOUT_S

PROBE = Path(__file__).with_name("hang_probe.py")
REPO = Path(__file__).parents[2]


@pytest.mark.timeout(120)  # runs a child pytest that hangs for the unit timeout
def test_a_hanging_unit_test_fails_at_the_unit_timeout_with_where_it_hangs() -> None:
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(PROBE)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
    )
    output = child.stdout + child.stderr
    assert child.returncode == 1, output
    # pytest-timeout names the limit it applied: the unit timeout, not the suite's default.
    assert f"Timeout (>{UNIT_TEST_TIMEOUT_S}s)" in output, output
    assert "hang_probe.py" in output and "test_waits_for_an_event_nobody_sets" in output, output


def test_a_unit_test_without_its_own_marker_gets_the_short_timeout(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (UNIT_TEST_TIMEOUT_S,)
    assert UNIT_TEST_TIMEOUT_S <= 10


@pytest.mark.timeout(42)
def test_a_unit_test_own_marker_wins_over_the_short_timeout(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("timeout").args == (42,)


@given(st.integers())
def test_a_property_test_gets_the_property_timeout(request: pytest.FixtureRequest, n: int) -> None:
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (PROPERTY_TEST_TIMEOUT_S,)
