"""`clock`: the current time as ISO-8601, in UTC or an IANA time zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentstream.tools_catalog import CLOCK
from agentstream_tools.registry import Tool, ToolFn
from agentstream_tools.validation import ArgumentError


def make_clock(now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> ToolFn:
    async def clock(args: dict[str, Any]) -> str:
        name = args.get("timezone") or "UTC"
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ArgumentError(f"unknown timezone {name!r}: use an IANA name such as Europe/Paris") from None
        return now().astimezone(zone).isoformat(timespec="seconds")

    return clock


def clock_tool(now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Tool:
    return Tool.from_spec(CLOCK, make_clock(now))
