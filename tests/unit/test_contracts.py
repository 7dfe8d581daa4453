import json

import pytest
from pydantic import ValidationError

from agentstream.contracts import (
    InboundMessage,
    MessageDelta,
    ReplyTarget,
    RunCommandAdapter,
    RunEventAdapter,
    RunFinished,
    StartRun,
    Usage,
    conversation_key,
)


def test_inbound_minimal_and_unknown_fields_ignored():
    raw = {"id": "m1", "platform": "web", "chat_id": "c1", "user": {"id": "u1"}, "text": "hi", "extra": 1}
    msg = InboundMessage.model_validate_json(json.dumps(raw))
    assert msg.conversation_key == "web:c1"
    assert msg.type == "inbound.message" and msg.v == 1


def test_inbound_missing_chat_id_names_field():
    with pytest.raises(ValidationError) as err:
        InboundMessage.model_validate({"id": "m1", "platform": "web", "user": {"id": "u"}, "text": "x"})
    assert any(e["loc"] == ("chat_id",) for e in err.value.errors())


INBOUND = {"id": "m1", "platform": "web", "chat_id": "c1", "user": {"id": "u1"}, "text": "hi"}


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("chat_id",), {"a": 1}),
        (("chat_id",), 42),
        (("chat_id",), True),
        (("id",), 4.2),
        (("id",), [1]),
        (("thread_id",), {"a": 1}),
        (("user", "id"), 5),
        (("user", "team_id"), ["t"]),
        (("user", "tenant_id"), 1),
        (("source",), {"a": 1}),
        (("id",), "x" * 257),
        (("chat_id",), "c" * 201),
        (("thread_id",), "t" * 201),
        (("platform",), "p" * 65),
        (("user", "id"), "u" * 257),
        (("user", "team_id"), "t" * 257),
        (("user", "tenant_id"), "t" * 257),
        (("id",), "m\n1"),
        (("chat_id",), "c\x00"),
        (("thread_id",), "\x1b[31m"),
        (("user", "id"), "u\x7f"),
        (("user", "team_id"), "t\u0085"),
        (("platform",), "web\t"),
        (("source",), "api\r"),
    ],
)
def test_inbound_ids_are_bounded_strings_without_control_characters(path, value):
    raw = json.loads(json.dumps(INBOUND))
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError) as err:
        InboundMessage.model_validate_json(json.dumps(raw))
    assert [e["loc"] for e in err.value.errors()] == [path]


def test_inbound_longest_ids_make_a_conversation_key_within_512():
    msg = InboundMessage.model_validate(
        {
            **INBOUND,
            "platform": "p" * 64,
            "chat_id": "c" * 200,
            "thread_id": "t" * 200,
            "id": "i" * 256,
            "user": {"id": "u" * 256, "name": "Zoë\n"},
        }
    )
    assert len(msg.conversation_key) <= 512


def test_inbound_dedupe_key_counts_no_source_as_kafka():
    assert InboundMessage.model_validate(INBOUND).dedupe_key == ("kafka", "web", "m1")
    assert InboundMessage.model_validate({**INBOUND, "source": "api"}).dedupe_key == ("api", "web", "m1")


def test_conversation_key_with_thread():
    assert conversation_key("slack", "C1", "T9") == "slack:C1:T9"
    assert conversation_key("slack", "C1") == "slack:C1"


def test_event_union_round_trip():
    ev = MessageDelta(run_id="r", root_run_id="r", conversation_key="k", seq=3, message_id="m", text="he")
    back = RunEventAdapter.validate_json(ev.to_json())
    assert back == ev and isinstance(back, MessageDelta)
    fin = RunFinished(
        run_id="r",
        root_run_id="r",
        conversation_key="k",
        seq=9,
        status="completed",
        usage=Usage(prompt_tokens=1, completion_tokens=2, llm_calls=1),
    )
    assert RunEventAdapter.validate_json(fin.to_json()).usage.total_tokens == 3


def test_run_command_union_discriminates():
    cmd = StartRun(
        run_id="r",
        conversation_key="k",
        assistant_id="a",
        text="t",
        reply_target=ReplyTarget(platform="web", chat_id="c"),
    )
    assert isinstance(RunCommandAdapter.validate_json(cmd.to_json()), StartRun)
    with pytest.raises(ValidationError):
        RunCommandAdapter.validate_json(b'{"type": "nope"}')


def test_usage_adds():
    assert (Usage(prompt_tokens=1, completion_tokens=1, llm_calls=1) + Usage(prompt_tokens=2, llm_calls=1)) == Usage(
        prompt_tokens=3, completion_tokens=1, llm_calls=2
    )


def test_approval_arguments_are_shown_cut_with_a_marker():
    from agentstream.contracts import ARGUMENTS_SHOWN_CHARS, shown_arguments

    assert shown_arguments('{"a": 1}') == '{"a": 1}'
    long = "x" * (ARGUMENTS_SHOWN_CHARS + 50)
    shown = shown_arguments(long)
    assert shown.startswith("x" * ARGUMENTS_SHOWN_CHARS)
    assert shown.endswith(f"… [{len(long)} characters in all]")
