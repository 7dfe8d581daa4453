"""`StartRun.options` as a typed `RunOptions`: parsed once, the wire unchanged."""

from __future__ import annotations

import json

import pytest

from agentstream.contracts import ChatMessage, DoubleTexting, ReplyTarget, RunCommandAdapter, RunOptions, StartRun


def start_with(options: dict[str, object]) -> StartRun:
    record = {
        "type": "run.start",
        "run_id": "r1",
        "conversation_key": "web:c1",
        "assistant_id": "default",
        "text": "hi",
        "reply_target": {"platform": "web", "chat_id": "c1"},
        "options": options,
    }
    decoded = RunCommandAdapter.validate_json(json.dumps(record))
    assert isinstance(decoded, StartRun)
    return decoded


def test_known_keys_are_typed_when_the_record_is_decoded():
    start = start_with(
        {
            "connector": "use::fast",
            "double_texting": "collect",
            "history_size": 3,
            "messages": [{"role": "user", "content": "earlier"}],
        }
    )
    assert start.options.connector == "use::fast"
    assert start.options.double_texting is DoubleTexting.COLLECT
    assert start.options.history_size == 3
    assert start.options.messages == [ChatMessage(role="user", content="earlier")]


def test_the_wire_keeps_exactly_the_given_keys_unknown_ones_included():
    given = {"connector": "gpt", "temperature": 0.2, "skip.history": True, "delivery": {"edit_interval": 2}}
    start = start_with(given)
    assert start.options.model_extra == {"temperature": 0.2, "skip.history": True}
    assert json.loads(start.to_json())["options"] == given
    assert json.loads(start_with({}).to_json())["options"] == {}


@pytest.mark.parametrize("given", [{}, {"temperature": 0.2}, {"connector": None}, {"skip": None, "top_p": 1}])
def test_options_serialize_to_the_given_keys_whichever_they_are(given: dict[str, object]) -> None:
    """Nothing given serializes to `{}` without the model's own serializer (a shortcut): an extra
    key alone, or a typed one given as null, is still given."""
    options = RunOptions.model_validate(given)
    assert options.model_dump() == given
    assert json.loads(options.model_dump_json()) == given
    assert json.loads(start_with(given).to_json())["options"] == given


def test_a_malformed_known_key_is_ignored_not_refused():
    start = start_with({"connector": 5, "double_texting": "bogus", "history_size": -1, "temperature": 0.5})
    assert (start.options.connector, start.options.double_texting, start.options.history_size) == (None, None, None)
    assert start.options.as_dict() == {"temperature": 0.5}
    assert RunOptions.model_validate({"history_size": True, "connector": ""}).as_dict() == {}


def test_skip_history_in_each_of_its_spellings():
    for given in ({"skip": "history"}, {"skip": ["history"]}, {"skip.history": True}):
        assert RunOptions.model_validate(given).skips_history, given
    for given in ({"skip": ["other"]}, {"skip.history": "yes"}, {}):
        assert not RunOptions.model_validate(given).skips_history, given


def test_request_options_win_over_the_base_they_are_merged_over():
    request = RunOptions.model_validate({"temperature": 0.9, "history_size": 2})
    merged = request.over({"temperature": 0.1, "max_tokens": 33})
    assert merged.as_dict() == {"temperature": 0.9, "max_tokens": 33, "history_size": 2}
    assert merged.history_size == 2


def test_start_run_built_in_code_takes_the_typed_options():
    start = StartRun(
        run_id="r1",
        conversation_key="web:c1",
        assistant_id="default",
        text="hi",
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
        options=RunOptions(double_texting=DoubleTexting.REJECT),
    )
    assert json.loads(start.to_json())["options"] == {"double_texting": "reject"}
