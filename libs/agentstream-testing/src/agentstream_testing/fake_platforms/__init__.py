"""Fake chat platforms for tests: real HTTP servers on 127.0.0.1 speaking each documented protocol.

    async with FakeTelegram(per_chat_interval=1.0) as tg:
        adapter = TelegramAdapter(api_url=tg.url, token=tg.token)
        ...
        assert tg.texts("42") == ["the answer"]

Each records every call (`calls`), keeps each chat's messages with their edit history
(`chats`, `messages(chat)`, `texts(chat)`), enforces an optional per-chat rate limit
(`per_chat_interval`, answered with the platform's own 429 shape and `retry_after`),
and answers scripted failures (`fail_next(method, Failure(...))`). The fake Telegram parses
`parse_mode: HTML` as the Bot API does (`telegram_html`) and answers 400 "can't parse
entities" to markup the real one refuses.
"""

from agentstream_testing.fake_platforms.base import Call, Failure, FakeMessage, FakePlatform
from agentstream_testing.fake_platforms.discord import FakeDiscord
from agentstream_testing.fake_platforms.signal import FakeSignal
from agentstream_testing.fake_platforms.slack import FakeSlack
from agentstream_testing.fake_platforms.telegram import FakeTelegram
from agentstream_testing.fake_platforms.webhook import SIGNATURE_HEADER, FakeWebhookReceiver, signature

__all__ = [
    "SIGNATURE_HEADER",
    "Call",
    "FakeDiscord",
    "FakeMessage",
    "FakePlatform",
    "FakeSignal",
    "FakeSlack",
    "FakeTelegram",
    "FakeWebhookReceiver",
    "Failure",
    "signature",
]
