import json

from agentstream.config import load_settings
from agentstream_ingress.pipeline import DeadLetterDecision, StartDecision, decide

SETTINGS = load_settings()


def valid(**over):
    body = {"id": "m-1", "platform": "telegram", "chat_id": "42", "user": {"id": "u-1"}, "text": "hello"}
    body.update(over)
    return json.dumps(body).encode()


def test_valid_message_starts_a_run_keyed_by_conversation():
    d = decide(valid(thread_id="7"), SETTINGS)
    assert isinstance(d, StartDecision)
    assert d.start.conversation_key == "telegram:42:7" == d.queued.conversation_key
    assert d.start.run_id == d.queued.run_id == d.queued.root_run_id
    assert d.queued.seq == 0 and d.queued.inbound_id == "m-1"
    assert d.start.assistant_id == SETTINGS.default_assistant
    assert d.start.reply_target.platform == "telegram" and d.start.reply_target.thread_id == "7"
    assert d.start.user is not None and d.start.user.id == "u-1"


def test_explicit_assistant_wins():
    d = decide(valid(assistant_id="helper"), SETTINGS)
    assert isinstance(d, StartDecision) and d.start.assistant_id == "helper"


def test_not_json_is_dead_letter_without_notice():
    d = decide(b"\xff not json", SETTINGS)
    assert isinstance(d, DeadLetterDecision)
    assert d.error.startswith("not valid JSON") and d.notify is None


def test_missing_chat_id_names_the_field_and_cannot_notify():
    body = json.loads(valid())
    del body["chat_id"]
    d = decide(json.dumps(body).encode(), SETTINGS)
    assert isinstance(d, DeadLetterDecision)
    assert "chat_id" in d.error and "Field required" in d.error
    assert d.notify is None


def test_bad_field_with_readable_target_notifies_the_user():
    d = decide(valid(user="not-an-object"), SETTINGS)
    assert isinstance(d, DeadLetterDecision)
    assert "user" in d.error
    assert d.notify is not None and d.notify.platform == "telegram" and d.notify.chat_id == "42"


def test_json_that_is_not_an_object_is_dead_letter():
    d = decide(b"[1, 2]", SETTINGS)
    assert isinstance(d, DeadLetterDecision) and d.notify is None
