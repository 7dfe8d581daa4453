from datetime import UTC, datetime

import pytest

from agentstream_tools.builtin.clock import make_clock
from agentstream_tools.validation import ArgumentError

FIXED = datetime(2024, 1, 15, 12, 30, 5, 123456, tzinfo=UTC)


async def test_default_is_utc_iso8601():
    clock = make_clock(lambda: FIXED)
    assert await clock({}) == "2024-01-15T12:30:05+00:00"


async def test_iana_timezone():
    clock = make_clock(lambda: FIXED)
    assert await clock({"timezone": "Europe/Paris"}) == "2024-01-15T13:30:05+01:00"
    assert await clock({"timezone": "America/New_York"}) == "2024-01-15T07:30:05-05:00"


async def test_real_clock_parses_back():
    text = await make_clock()({"timezone": "Asia/Tokyo"})
    parsed = datetime.fromisoformat(text)
    assert parsed.utcoffset().total_seconds() == 9 * 3600
    assert abs((parsed - datetime.now(UTC)).total_seconds()) < 60  # the real clock's time, however loaded the machine


@pytest.mark.parametrize("zone", ["Mars/Olympus", "../etc/passwd"])
async def test_unknown_timezone_is_an_argument_error(zone):
    with pytest.raises(ArgumentError, match="unknown timezone"):
        await make_clock(lambda: FIXED)({"timezone": zone})
