"""The rule the executor verifies on every `tool-calls` record (agentstream.tool_call_signing), pure:
only a call a runner signed runs, only a tool its assistant was offered, only approved where the
tool requires approval; any field changed after signing breaks the signature."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentstream.config import ConfigError
from agentstream.config.tools import ToolsSettings
from agentstream.contracts import ToolCallRefusal, ToolCallRequest
from agentstream.tool_call_signing import call_secret, offers, refusal, refusal_error, sign

SECRET = b"s" * 32
OTHER_SECRET = b"o" * 32


def call(tool: str = "calculator", **fields: object) -> ToolCallRequest:
    base: dict[str, object] = {
        "run_id": "r1",
        "root_run_id": "r1",
        "conversation_key": "web:alice",
        "call_id": "c1",
        "tool": tool,
        "arguments": '{"expression": "1+1"}',
        "deadline": datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=UTC),
        "offered": ["calculator", "files__*"],
    }
    return ToolCallRequest.model_validate(base | fields)


def check(request: ToolCallRequest, *, requires_approval: bool = False, accept_unsigned: bool = False):  # type: ignore[no-untyped-def]
    return refusal(request, secret=SECRET, accept_unsigned=accept_unsigned, requires_approval=requires_approval)


def test_a_signed_call_of_an_offered_tool_runs_and_survives_the_topic():
    signed = sign(call(), SECRET)
    assert signed.signature is not None and signed.signature.startswith("v1:")
    assert check(signed) is None
    # What the executor reads is the JSON the runner wrote: the signature still holds after the round trip.
    assert check(ToolCallRequest.model_validate_json(signed.to_json())) is None


def test_an_unsigned_call_is_refused_unless_unsigned_calls_are_accepted():
    assert check(call()) is ToolCallRefusal.UNSIGNED
    assert check(call(), accept_unsigned=True) is None


@pytest.mark.parametrize(
    "change",
    [
        {"tool": "shell"},
        {"arguments": '{"expression": "2+2"}'},
        {"conversation_key": "web:mallory"},  # the workspace is the conversation's: a call cannot move
        {"run_id": "r2"},
        {"call_id": "c2"},
        {"offered": ["calculator", "shell"]},
        {"approval_id": "a-forged"},  # "approved" is not a field anyone can add
        {"deadline": datetime(2027, 1, 1, tzinfo=UTC)},
    ],
    ids=lambda change: next(iter(change)),
)
def test_any_field_changed_after_signing_breaks_the_signature(change: dict[str, object]):
    forged = sign(call(), SECRET).model_copy(update=change)
    assert check(forged) is ToolCallRefusal.BAD_SIGNATURE


def test_a_signature_made_with_another_secret_is_refused():
    assert check(sign(call(), OTHER_SECRET)) is ToolCallRefusal.BAD_SIGNATURE
    assert check(call(signature="v1:" + "0" * 64)) is ToolCallRefusal.BAD_SIGNATURE
    # An executor without a secret can verify nothing: a signed call is refused, never taken on trust.
    signed = sign(call(), SECRET)
    assert refusal(signed, secret=None, accept_unsigned=True, requires_approval=False) is ToolCallRefusal.BAD_SIGNATURE


def test_a_tool_outside_the_offered_list_is_refused_even_when_signed():
    assert check(sign(call("shell"), SECRET)) is ToolCallRefusal.NOT_OFFERED
    assert check(sign(call(offered=None), SECRET)) is ToolCallRefusal.NOT_OFFERED
    assert check(sign(call("files__write"), SECRET)) is None  # `files__*` offers every tool of the source


def test_a_tool_that_requires_approval_runs_only_with_the_signed_approval():
    assert check(sign(call(), SECRET), requires_approval=True) is ToolCallRefusal.NOT_APPROVED
    assert check(sign(call(approval_id="a1"), SECRET), requires_approval=True) is None


def test_offers_follows_the_assistants_tools_list():
    assert offers(["calculator", "files__*"], "files__delete")
    assert not offers(["calculator", "files__*"], "shell")
    assert not offers(["files__*"], "filesystem__delete")
    assert not offers([], "calculator")


def test_refusal_errors_say_why_and_quote_the_tool_short():
    assert refusal_error(ToolCallRefusal.NOT_APPROVED, "shell") == (
        "tool call refused: 'shell' requires approval and the call carries none"
    )
    assert len(refusal_error(ToolCallRefusal.NOT_OFFERED, "x" * 1000)) < 150


def test_the_secret_is_required_long_enough_or_unsigned_calls_opted_into(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AGENTSTREAM_TEST_CALL_SECRET", raising=False)
    tools = ToolsSettings(call_secret_env="AGENTSTREAM_TEST_CALL_SECRET")
    with pytest.raises(ConfigError, match="tools.call_secret_env: the env var AGENTSTREAM_TEST_CALL_SECRET is not set"):
        call_secret(tools)
    assert call_secret(tools.model_copy(update={"accept_unsigned_calls": True})) is None
    monkeypatch.setenv("AGENTSTREAM_TEST_CALL_SECRET", "short")
    with pytest.raises(ConfigError, match="under 32 bytes"):
        call_secret(tools)
    monkeypatch.setenv("AGENTSTREAM_TEST_CALL_SECRET", "k" * 32)
    assert call_secret(tools) == b"k" * 32
