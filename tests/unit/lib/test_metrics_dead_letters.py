"""A dead letter's free-text reason becomes one of a few label values."""

from __future__ import annotations

import pytest

from agentstream.kafka.decoding import undecodable_reason
from agentstream.kafka.guard import failure_reason
from agentstream.metrics import DeadLetterReason, dead_letter_reason


def _validation_error(raw: bytes):
    from pydantic import BaseModel, ValidationError

    class Record(BaseModel):
        n: int

    with pytest.raises(ValidationError) as caught:
        Record.model_validate_json(raw)
    return caught.value


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (undecodable_reason(_validation_error(b"{not json"), "Record"), DeadLetterReason.INVALID_JSON),
        (undecodable_reason(_validation_error(b'{"n": "x"}'), "Record"), DeadLetterReason.INVALID_RECORD),
        ("run could not be stored: DataError: value too long", DeadLetterReason.UNSTORABLE),
        (failure_reason(RecursionError("maximum recursion depth exceeded")), DeadLetterReason.HANDLER_ERROR),
        ("message text too long for this assistant", DeadLetterReason.REJECTED),
    ],
)
def test_dead_letter_reasons_are_classed_from_what_the_services_write(error: str, reason: DeadLetterReason) -> None:
    assert dead_letter_reason(error) is reason
