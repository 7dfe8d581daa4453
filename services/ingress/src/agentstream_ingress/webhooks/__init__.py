"""Platform webhooks: verification and conversion to `InboundMessage`, as pure functions."""

from __future__ import annotations


class InvalidUpdate(ValueError):
    """A platform message whose ids are not scalars or that breaks the InboundMessage
    contract; the webhook answers 400 without repeating the input."""


def scalar_id(value: object, field: str) -> str:
    """A platform id as text: only a JSON string or integer is an id (a bool, float or
    object would become a key like `telegram:{'a': 1}`)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidUpdate(f"{field} is not a string or an integer")
    return str(value)


def optional_id(value: object, field: str) -> str | None:
    return None if value is None else scalar_id(value, field)
