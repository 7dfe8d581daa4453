"""Repeated log lines, once per interval with a count.

While the broker is down, aiokafka logs the same failure many times a second from
every client (hundreds of lines a second across a stack), and our own periodic
commits repeat "offset commit failed". `Throttle` lets the first line of a kind
through, counts the repeats for `interval_s`, and lets the next one through with
`repeated=<count>` (how many were dropped since the last line shown).
`ThrottleFilter` applies it to log records: every record of the loggers it is given
(by name prefix), and our own records whose event is in `events`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

DEFAULT_INTERVAL_S = 10.0
# Loggers whose every line repeats while Kafka is unreachable.
THROTTLED_LOGGERS = ("aiokafka",)
# Our own warnings that repeat on every commit round while Kafka is unreachable.
THROTTLED_EVENTS = frozenset({"offset commit failed", "batch output not acked", "watchdog tick failed"})
MAX_KEYS = 1000  # kinds remembered; a flood of distinct lines must not grow memory


@dataclass
class _Seen:
    shown_at: float
    dropped: int = 0


class Throttle:
    """`admit(key)` → None to drop the line, else the number dropped since the last one shown."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, clock: Callable[[], float] = time.monotonic) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = interval_s
        self.clock = clock
        self._seen: dict[Hashable, _Seen] = {}

    def admit(self, key: Hashable) -> int | None:
        now = self.clock()
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) >= MAX_KEYS:
                self._forget_before(now - self.interval_s)
            self._seen[key] = _Seen(now)
            return 0
        if now - seen.shown_at < self.interval_s:
            seen.dropped += 1
            return None
        dropped, seen.shown_at, seen.dropped = seen.dropped, now, 0
        return dropped

    def _forget_before(self, cutoff: float) -> None:
        for key in [k for k, s in self._seen.items() if s.shown_at < cutoff]:
            del self._seen[key]
        if len(self._seen) >= MAX_KEYS:  # all recent: start over rather than grow
            self._seen.clear()


class ThrottleFilter(logging.Filter):
    """A handler filter: throttles the records of `loggers` (name prefixes) and our
    structlog records whose `event` is one of `events`; every other record passes."""

    def __init__(
        self,
        loggers: Iterable[str] = THROTTLED_LOGGERS,
        events: Iterable[str] = THROTTLED_EVENTS,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.prefixes = tuple(loggers)
        self.events = frozenset(events)
        self.throttle = Throttle(interval_s, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        key = self._key(record)
        if key is None:
            return True
        dropped = self.throttle.admit(key)
        if dropped is None:
            return False
        if dropped:
            self._mark(record, dropped)
        return True

    def _key(self, record: logging.LogRecord) -> Hashable | None:
        if isinstance(record.msg, dict):  # a structlog record: the event dict
            event = record.msg.get("event")
            if isinstance(event, str) and event in self.events:
                return (record.name, record.levelno, event)
            return None
        if record.name.startswith(self.prefixes):
            # The format string, not the message: one kind whatever the partition or node.
            return (record.name, record.levelno, str(record.msg))
        return None

    def _mark(self, record: logging.LogRecord, dropped: int) -> None:
        note = f"{dropped} more like this in the last {self.throttle.interval_s:g} s"
        if isinstance(record.msg, dict):
            record.msg = {**record.msg, "repeated": dropped, "repeated_note": note}
        else:
            record.msg, record.args = f"{record.getMessage()} ({note})", None
