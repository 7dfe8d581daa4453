"""Webhook verification and conversion, pure."""

import pytest

from agentstream_ingress.webhooks import InvalidUpdate, slack, telegram

UPDATE = {
    "update_id": 9,
    "message": {
        "message_id": 5,
        "from": {"id": 77, "first_name": "Ann", "is_bot": False},
        "chat": {"id": 77, "type": "private"},
        "text": "hi",
        "reply_to_message": {"message_id": 4},
    },
}


def test_telegram_secret_check():
    assert telegram.secret_ok("s3cret", "s3cret")
    assert not telegram.secret_ok("s3cret", "wrong")
    assert not telegram.secret_ok("s3cret", None)
    assert not telegram.secret_ok(None, "anything")  # no secret configured refuses everything


def test_telegram_update_to_inbound():
    msg = telegram.to_inbound(UPDATE, "main")
    assert msg is not None and msg.id == "77:5" and msg.chat_id == "77" and msg.user.id == "77"
    assert msg.user.name == "Ann" and msg.reply_to_id == "4" and msg.text == "hi"
    assert msg.metadata["bot"] == "main" and msg.metadata["chat_type"] == "direct"
    assert telegram.to_inbound({"update_id": 1, "callback_query": {}}, "main") is None
    bot = {"update_id": 2, "message": {**UPDATE["message"], "from": {"id": 1, "is_bot": True}}}
    assert telegram.to_inbound(bot, "main") is None


def test_slack_signature():
    body = b'{"type":"event_callback"}'
    sig = slack.sign("secret", "1000", body)
    assert slack.check_signature("secret", "1000", sig, body, 1100, 300) is slack.SignatureCheck.OK
    assert slack.check_signature("secret", "1000", sig, body + b" ", 1100, 300) is slack.SignatureCheck.BAD
    assert slack.check_signature("secret", "1000", sig, body, 1000 + 301, 300) is slack.SignatureCheck.STALE
    assert slack.check_signature("secret", None, sig, body, 1000, 300) is slack.SignatureCheck.MISSING
    assert slack.check_signature("secret", "soon", sig, body, 1000, 300) is slack.SignatureCheck.BAD


@pytest.mark.parametrize("ts", ["9" * 400, "-1000", "１０００", " 1000", "1_000", "1e3", "9" * 13])
def test_slack_timestamp_must_be_plain_unix_seconds(ts):
    body = b"{}"
    sig = slack.sign("secret", ts, body)
    assert slack.check_signature("secret", ts, sig, body, 1000, 300) is slack.SignatureCheck.BAD


def test_telegram_ids_as_integers_or_strings_only():
    as_strings = {
        "update_id": 9,
        "message": {**UPDATE["message"], "chat": {"id": "77", "type": "private"}, "message_thread_id": 12},
    }
    msg = telegram.to_inbound(as_strings, "main")
    assert msg is not None and msg.conversation_key == "telegram:77:12" and msg.source == "webhook:telegram:main"
    for bad in ({"a": 1}, [1], True, 1.0, None):
        update = {"update_id": 9, "message": {**UPDATE["message"], "message_id": bad}}
        with pytest.raises(InvalidUpdate):
            telegram.to_inbound(update, "main")
    with pytest.raises(InvalidUpdate):  # fits no contract field: control characters
        telegram.to_inbound({"update_id": 9, "message": {**UPDATE["message"], "chat": {"id": "7\x00"}}}, "main")


def test_slack_event_to_inbound_and_bot_events_dropped():
    payload = {
        "type": "event_callback",
        "team_id": "T1",
        "event_id": "Ev1",
        "event": {"type": "message", "channel": "D1", "user": "U1", "text": "hey", "ts": "1.2", "channel_type": "im"},
    }
    msg = slack.to_inbound(payload)
    assert msg is not None and msg.id == "D1:1.2" and msg.user.team_id == "T1"
    assert msg.metadata["chat_type"] == "direct" and msg.thread_id is None
    threaded = {**payload, "event": {**payload["event"], "thread_ts": "1.0"}}
    assert slack.to_inbound(threaded).thread_id == "1.0"
    assert slack.to_inbound({**payload, "event": {**payload["event"], "bot_id": "B1"}}) is None
    assert slack.to_inbound({**payload, "event": {**payload["event"], "subtype": "bot_message"}}) is None
    assert slack.to_inbound({"type": "event_callback", "event": {"type": "reaction_added"}}) is None
