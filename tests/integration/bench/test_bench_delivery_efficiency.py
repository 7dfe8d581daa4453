"""The delivery efficiency benchmark runs end to end on a tiny load and reports sane figures."""

from __future__ import annotations

import sys
from pathlib import Path

# bench/ is a directory of scripts at the repository root, not an installed package.
ROOT = str(Path(__file__).resolve().parents[3])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.delivery_efficiency import format_table, run  # noqa: E402


async def test_delivery_efficiency_smoke() -> None:
    # tiny: the naive consumer waits out every 429 (≥ 1 s per delta), so a real run is long
    result = await run(streams=3, seconds=1.0, rate=8.0)
    ours, naive = result["agentstream"], result["naive"]
    assert isinstance(ours, dict) and isinstance(naive, dict)
    assert ours["exact_finals_pct"] == 100.0 and naive["exact_finals_pct"] == 100.0
    assert ours["rate_limited"] == 0
    assert ours["messages"] == 3
    assert naive["api_calls"] >= 3 * ours["api_calls"] and naive["rate_limited"] > 0
    assert "agentstream" in format_table(result)
