"""Hypothesis: whatever bytes arrive, parsing returns a message or a dead letter with a reason."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstream.contracts import InboundMessage
from agentstream_ingress.decisions import DeadLetterDecision
from agentstream_ingress.parsing import parse

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
VALID = {"id": "m", "platform": "web", "chat_id": "c", "user": {"id": "u"}, "text": "hi"}


@pytest.mark.timeout(60)  # 300 hypothesis examples
@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_parse_or_dead_letter(raw):
    result = parse(raw, 1000)
    assert isinstance(result, InboundMessage | DeadLetterDecision)
    if isinstance(result, DeadLetterDecision):
        assert result.error


@pytest.mark.timeout(60)  # 300 hypothesis examples
@settings(max_examples=300, suppress_health_check=list(HealthCheck), deadline=None)
@given(st.sampled_from(sorted(VALID)), json_values | st.just("__missing__"))
def test_a_wrong_required_field_is_a_dead_letter_naming_it(field, value):
    body = dict(VALID)
    if value == "__missing__":
        del body[field]
    else:
        body[field] = value
    result = parse(json.dumps(body).encode(), 1000)
    if isinstance(result, InboundMessage):  # the value happened to be valid for the field
        assert isinstance(value, str | dict) and value != "__missing__"
    else:
        assert field in result.error


def test_invalid_utf8_oversized_fields_and_huge_text():
    assert isinstance(parse(b'{"id": "\xff\xfe", "platform": "web"}'), DeadLetterDecision)
    valid = json.dumps(VALID).replace('"hi"', '"h\xffi"').encode("latin-1")
    assert isinstance(parse(valid), DeadLetterDecision)
    long_id = parse(json.dumps({**VALID, "id": "x" * 257}).encode())
    assert isinstance(long_id, DeadLetterDecision) and "id: String should have at most 256" in long_id.error
    long_chat = parse(json.dumps({**VALID, "chat_id": "c" * 201}).encode())
    assert isinstance(long_chat, DeadLetterDecision) and long_chat.notify is None  # no notice to a bogus chat
    control = parse(json.dumps({**VALID, "user": {"id": "u\u0007"}}).encode())
    assert isinstance(control, DeadLetterDecision) and "user.id" in control.error and control.notify is not None
    huge = parse(json.dumps({**VALID, "text": "x" * 1001}).encode(), 1000)
    assert isinstance(huge, DeadLetterDecision) and huge.notify is not None


def test_json_nested_past_the_recursion_limit_is_dead_lettered_without_a_target():
    decision = parse(b"[" * 5000)
    assert isinstance(decision, DeadLetterDecision)
    assert decision.error.startswith("not valid JSON")
    assert decision.notify is None
