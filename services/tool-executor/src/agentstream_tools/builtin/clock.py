"""`clock`: the current time as ISO-8601, in UTC or an IANA time zone."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agentstream.tools_catalog import CLOCK
from agentstream_tools.registry import Tool, ToolFn
from agentstream_tools.validation import ArgumentError, shown

# What an IANA name can look like (`America/Argentina/ComodRivadavia` is 32 long): anything
# else is refused before it reaches the file system, whose errors carry paths.
ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*")
MAX_ZONE_CHARS = 64


def make_clock(now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> ToolFn:
    async def clock(args: dict[str, Any]) -> str:
        name = args.get("timezone") or "UTC"
        unknown = ArgumentError(f"unknown timezone {shown(name)}: use an IANA name such as Europe/Paris")
        if not isinstance(name, str) or len(name) > MAX_ZONE_CHARS or not ZONE_NAME.fullmatch(name):
            raise unknown
        try:
            zone = ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory such as "America"
            raise unknown from None
        return now().astimezone(zone).isoformat(timespec="seconds")

    return clock


def clock_tool(now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Tool:
    return Tool.from_spec(CLOCK, make_clock(now))
