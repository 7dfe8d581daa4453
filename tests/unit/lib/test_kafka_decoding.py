"""decode_record and RecordDecoder: a record as its contract, or dead-lettered with a reason."""

from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, TypeAdapter

from agentstream.kafka.decoding import RecordDecoder, Undecodable, decode_record


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


async def test_the_decoder_dead_letters_what_it_cannot_decode() -> None:
    letters: list[tuple[Any, str]] = []

    async def dead_letter(msg: Any, reason: str) -> None:
        letters.append((msg, reason))

    decode = RecordDecoder(PingAdapter, "Ping", dead_letter)
    good, bad = SimpleNamespace(body=b'{"n": 2}'), SimpleNamespace(body=b'{"n": []}')
    assert await decode(good) == Ping(n=2)
    assert await decode(bad) is None
    assert len(letters) == 1 and letters[0][0] is bad and letters[0][1].startswith("invalid Ping: n: ")
