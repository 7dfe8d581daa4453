"""Keyset pagination: a total sort key per list, and opaque cursors holding the last row's key.

A page is `WHERE (key) > (cursor key) ORDER BY key LIMIT n` (no OFFSET), so rows added
after the cursor's position show up on later pages and nothing shifts between reads.
Timestamps in a key are coalesced to `NO_TIME`: SQLite sorts NULL first and PostgreSQL
last, and `NULL > x` matches nothing, so both engines would page differently.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import ColumnElement, Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_CURSOR_CHARS = 1024  # a key holds a timestamp, a run id and two ints: far below this
NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)  # stands for a missing timestamp in a sort key

Key = tuple[Any, ...]


class InvalidCursor(ValueError):
    """A cursor this list did not hand out: not base64 JSON, another list's, or the wrong shape."""

    def __init__(self) -> None:
        super().__init__("invalid cursor")


def _utc(value: Any) -> Any:
    if not isinstance(value, datetime):
        return value
    # SQLite hands timestamps back without their zone; every stored timestamp is UTC.
    return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Keyset:
    """The order of one list: its key columns (unique together), one direction, the key's value types.

    `kind` goes into every cursor, so a cursor of one list is refused by another.
    """

    kind: str
    columns: tuple[ColumnElement[Any] | InstrumentedAttribute[Any], ...]
    types: tuple[type, ...]  # AwareDatetime, str or int, one per column
    descending: bool = False
    _adapter: TypeAdapter[Key] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.types) != len(self.columns):
            raise ValueError(f"keyset {self.kind}: {len(self.columns)} columns, {len(self.types)} types")
        shape: Any = tuple.__class_getitem__((str, *self.types))  # tuple[str, *types]: the kind, then the key
        object.__setattr__(self, "_adapter", TypeAdapter(shape))

    def encode(self, key: Key) -> str:
        values = [_utc(v).isoformat() if isinstance(v, datetime) else v for v in key]
        raw = json.dumps([self.kind, *values], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    def decode(self, cursor: str) -> Key:
        if len(cursor) > MAX_CURSOR_CHARS:
            raise InvalidCursor
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            # Strict: ints stay ints, strings stay strings; timestamps must carry their zone.
            kind, *key = self._adapter.validate_json(raw, strict=True)
        except (binascii.Error, ValueError, ValidationError):
            raise InvalidCursor from None
        if kind != self.kind:
            raise InvalidCursor
        return tuple(_utc(v) for v in key)

    def after(self, key: Key) -> ColumnElement[bool]:
        """Rows past `key` in this order: (a, b) > (x, y) as a > x OR (a = x AND b > y), on any engine."""
        pairs = list(zip(self.columns, key, strict=True))
        clause = self._past(*pairs[-1])
        for column, value in reversed(pairs[:-1]):
            clause = or_(self._past(column, value), and_(column == value, clause))
        return clause

    def _past(self, column: ColumnElement[Any] | InstrumentedAttribute[Any], value: Any) -> ColumnElement[bool]:
        return column < value if self.descending else column > value

    def order_by(self) -> list[ColumnElement[Any]]:
        return [c.desc() if self.descending else c.asc() for c in self.columns]

    def page(self, query: Select[Any], after: Key | None, limit: int) -> Select[Any]:
        """`query` ordered by this key, past `after`, one row more than `limit` (is there a next page?),
        with the key columns appended to each row."""
        query = query.add_columns(*self.columns).order_by(*self.order_by()).limit(limit + 1)
        return query if after is None else query.where(self.after(after))

    def split(self, rows: Sequence[Any], limit: int) -> tuple[list[tuple[Any, ...]], str | None]:
        """The rows of `page` without their key columns, and the cursor of the next page (None on the last)."""
        n = len(self.columns)
        items = [tuple(r)[:-n] for r in rows[:limit]]
        more = len(rows) > limit
        return items, self.encode(tuple(rows[limit - 1])[-n:]) if more else None
