"""Decoding a consumed record into its contract, or dead-lettering it with the reason.

Every service reads records the same way: the bytes are validated against a pydantic
`TypeAdapter`; a record that fails goes to `dlq` with a readable reason (never the
bytes' fault to crash a handler) and the handler reads on (kafka/consumer.py `Contract`). The reasons say which
failure it was: `not valid JSON: …` for bytes that are no JSON, `invalid <what>: …` for
JSON that is not the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")


def describe_validation_error(err: ValidationError) -> str:
    """`text: Field required; chat_id: String should have at most 256 characters`."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(record)"
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Undecodable:
    """A record that is not what its topic carries, and why (the dead letter's reason)."""

    reason: str


def undecodable_reason(err: ValidationError, what: str) -> str:
    if any(e["type"] == "json_invalid" for e in err.errors()):
        return "not valid JSON: " + describe_validation_error(err)
    return f"invalid {what}: " + describe_validation_error(err)


def decode_record(raw: bytes, adapter: TypeAdapter[T], what: str) -> T | Undecodable:
    """The record as `adapter`'s type, or why not (`what` names the type in the reason)."""
    try:
        return adapter.validate_json(raw)
    except ValidationError as err:
        return Undecodable(undecodable_reason(err, what))
