"""`encodable` (the quick check) and `unencodable` (where, and what) agree on every shape they walk."""

from __future__ import annotations

from enum import StrEnum

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from agentstream.contracts import InboundMessage
from agentstream.contracts.unicode import encodable, unencodable


class Colour(StrEnum):
    RED = "red"


class Inner(BaseModel):
    name: str
    tags: list[str] = []


class Outer(BaseModel):
    inner: Inner
    data: dict[str, object] = {}
    colour: Colour = Colour.RED
    count: int = 0


GOOD: list[object] = [
    "ascii",
    "é☃ 𝄞",
    None,
    3,
    2.5,
    True,
    Colour.RED,
    ["a", ("b", {"c": ["d"]})],
    {"ключ": "значение", 1: "one"},
    Outer(inner=Inner(name="n", tags=["é"]), data={"k": [1, "v"]}),
]
BAD: list[tuple[object, str]] = [
    ("\ud800", "(text): a lone surrogate (U+D800) at character 0 is not valid Unicode"),
    (["ok", "x\udc00"], "1: a lone surrogate (U+DC00) at character 1 is not valid Unicode"),
    ({"k\ud800": "v"}, "'k\\ud800': a lone surrogate (U+D800) at character 1 is not valid Unicode"),
    ({"k": {"deep": ["\udfff"]}}, "k.deep.0: a lone surrogate (U+DFFF) at character 0 is not valid Unicode"),
    (
        Outer(inner=Inner(name="n", tags=["fine", "ab\ud801"])),
        "inner.tags.1: a lone surrogate (U+D801) at character 2 is not valid Unicode",
    ),
    (
        Outer(inner=Inner(name="n"), data={"x": ("\ud802",)}),
        "data.x.0: a lone surrogate (U+D802) at character 0 is not valid Unicode",
    ),
]


@pytest.mark.parametrize("value", GOOD)
def test_valid_text_passes_both(value: object) -> None:
    assert encodable(value)
    assert unencodable(value) is None


@pytest.mark.parametrize(("value", "reason"), BAD)
def test_invalid_text_fails_both_with_where(value: object, reason: str) -> None:
    assert not encodable(value)
    assert unencodable(value) == reason


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": "1", "platform": "web", "chat_id": "c", "user": {"id": "u"}, "text": "\\ud800"}',
        b'{"id": "1", "platform": "web", "chat_id": "c", "user": {"id": "u"}, "text": "hi",'
        b' "metadata": {"k": ["\\udfff"]}}',
        '{"id": "1", "platform": "web", "chat_id": "c", "user": {"id": "u"}, "text": "\ud800"}'.encode(
            "utf-8", "surrogatepass"
        ),
    ],
)
def test_a_record_decoded_from_json_cannot_hold_such_text(raw: bytes) -> None:
    """InboundMessage skips its walk of the text when validated from JSON: the parser refuses
    an escaped lone surrogate, and bytes that encode one, itself."""
    with pytest.raises(ValidationError, match="json_invalid"):
        InboundMessage.model_validate_json(raw)
    with pytest.raises(ValidationError, match="json_invalid"):
        TypeAdapter(InboundMessage).validate_json(raw)
