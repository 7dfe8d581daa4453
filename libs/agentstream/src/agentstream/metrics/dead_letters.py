"""Why a record went to `dlq`, as a bounded label: the dead letter's `error` is free text."""

from __future__ import annotations

from enum import StrEnum


class DeadLetterReason(StrEnum):
    INVALID_JSON = "invalid_json"  # the bytes are not JSON
    INVALID_RECORD = "invalid_record"  # JSON, but not the topic's contract
    UNSTORABLE = "unstorable"  # persistence could never store the run
    HANDLER_ERROR = "handler_error"  # a handler raised what it did not expect
    REJECTED = "rejected"  # refused by a service's own checks (ingress)


# Prefixes of the reasons the services write (kafka/decoding.py, persistence's flusher).
_PREFIXES = (
    ("not valid JSON", DeadLetterReason.INVALID_JSON),
    ("invalid ", DeadLetterReason.INVALID_RECORD),
    ("run could not be stored", DeadLetterReason.UNSTORABLE),
)


def dead_letter_reason(error: str) -> DeadLetterReason:
    for prefix, reason in _PREFIXES:
        if error.startswith(prefix):
            return reason
    # `failure_reason`'s "SomeError: first line": a handler's exception.
    head = error.split(":", 1)[0]
    if head.isidentifier() and head[:1].isupper():
        return DeadLetterReason.HANDLER_ERROR
    return DeadLetterReason.REJECTED
