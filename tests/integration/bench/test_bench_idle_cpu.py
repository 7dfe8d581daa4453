"""The idle benchmark starts `agentstream up`, measures its CPU and first tokens, and reports numbers."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

# bench/ is a directory of scripts at the repository root, not an installed package.
ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.idle_cpu import main  # noqa: E402


@pytest.mark.timeout(180)  # starts the whole stack in a child process, on a shared machine
def test_smoke_mode_reports_every_figure_as_a_number(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--idle-s", "2", "--messages", "2", "--gap-s", "1", "--json"])
    result = json.loads(capsys.readouterr().out)
    for key in ("stack_share", "broker_share", "total_share", "warm_first_p50_ms", "after_idle_first_p50_ms"):
        assert isinstance(result[key], float) and math.isfinite(result[key]), key
    assert 0 < result["stack_share"] < 2 and 0 <= result["broker_share"] < 2  # shares of one core
    assert result["total_share"] == pytest.approx(result["stack_share"] + result["broker_share"])
    assert len(result["warm_first_ms"]) == 2 and len(result["after_idle_first_ms"]) == 2
    assert all(0 < ms < 30_000 for ms in result["warm_first_ms"] + result["after_idle_first_ms"])
