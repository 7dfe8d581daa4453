"""Text a record can carry: valid Unicode, i.e. text that encodes as UTF-8.

Python's `json` (FastAPI's request bodies, webhook payloads) accepts an escaped lone surrogate
(`"\\ud800"`) and yields a `str` no record can be written with: the serializer refuses it, and
the caller would see the write fail like an outage. The text is the sender's fault, so it is
refused where it enters, with where it is (`unencodable`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel


def _first_unencodable(text: str) -> int | None:
    if text.isascii():  # the usual case, without an encode
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


_NO_TEXT = frozenset({int, float, bool})


def encodable(value: object) -> bool:
    """Whether all text in `value` (as `unencodable` walks it) is valid Unicode. The check every
    validated InboundMessage passes: no paths built, a model's fields read off its `__dict__`
    (building the paths was a third of ingress's CPU to parse a record)."""
    if isinstance(value, str):
        return value.isascii() or _first_unencodable(value) is None
    if value is None or type(value) in _NO_TEXT:
        return True
    # Loops, not `all(...)` over a generator: a generator per container cost as much as the check.
    if isinstance(value, BaseModel):
        for item in value.__dict__.values():  # noqa: SIM110
            if not encodable(item):
                return False
        return True
    if isinstance(value, Mapping):
        for key, item in value.items():
            if (isinstance(key, str) and not encodable(key)) or not encodable(item):
                return False
        return True
    if isinstance(value, list | tuple):
        for item in value:  # noqa: SIM110
            if not encodable(item):
                return False
        return True
    return True


def unencodable(value: object, path: str = "") -> str | None:
    """Where `value` (a string, a model, or JSON-like containers of them) holds text that is not
    valid Unicode, and what: `text: a lone surrogate (U+D800) at character 0 is not valid Unicode`;
    None when all of it is."""
    if encodable(value):
        return None
    return _where_unencodable(value, path)


def _where_unencodable(value: object, path: str) -> str | None:
    if isinstance(value, str):
        at = _first_unencodable(value)
        if at is None:
            return None
        where = path or "(text)"
        return f"{where}: a lone surrogate (U+{ord(value[at]):04X}) at character {at} is not valid Unicode"
    if isinstance(value, BaseModel):
        items: list[tuple[str, object]] = [(name, getattr(value, name)) for name in type(value).model_fields]
    elif isinstance(value, Mapping):
        for key in value:  # a key is text too
            if isinstance(key, str) and (found := _where_unencodable(key, f"{path}.{key!a}" if path else f"{key!a}")):
                return found
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list | tuple):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return None
    for name, item in items:
        if (found := _where_unencodable(item, f"{path}.{name}" if path else name)) is not None:
            return found
    return None
