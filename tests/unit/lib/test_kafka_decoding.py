"""decode_record and the consumer's `Contract`: a record as its contract, or why not (the dead letter's reason)."""

import pytest
from pydantic import BaseModel, TypeAdapter

from agentstream.kafka.consumer import Contract, NotTheContract
from agentstream.kafka.decoding import Undecodable, decode_record


class Ping(BaseModel):
    n: int


PingAdapter = TypeAdapter(Ping)


def test_a_valid_record_decodes() -> None:
    assert decode_record(b'{"n": 1}', PingAdapter, "Ping") == Ping(n=1)


def test_bytes_that_are_no_json_say_so() -> None:
    decoded = decode_record(b"{not json", PingAdapter, "Ping")
    assert isinstance(decoded, Undecodable) and decoded.reason.startswith("not valid JSON: ")


def test_json_that_is_not_the_contract_names_the_type_and_field() -> None:
    decoded = decode_record(b'{"n": "x"}', PingAdapter, "Ping")
    assert isinstance(decoded, Undecodable)
    assert decoded.reason.startswith("invalid Ping: n: ")


def test_deep_nesting_is_undecodable_not_a_crash() -> None:
    assert isinstance(decode_record(b"[" * 5000, PingAdapter, "Ping"), Undecodable)


def test_a_contract_decodes_or_raises_with_the_reason() -> None:
    decode = Contract(PingAdapter, "Ping")
    assert decode(b'{"n": 2}') == Ping(n=2)
    with pytest.raises(NotTheContract) as raised:
        decode(b'{"n": []}')
    assert raised.value.reason.startswith("invalid Ping: n: ")
