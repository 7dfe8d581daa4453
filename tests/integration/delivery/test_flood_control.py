"""Flood control against a fake Telegram: cadence under a fast stream, 429 scheduling per chat,
three strikes → final text only with exactly the missing tail."""

from __future__ import annotations

import asyncio
import time

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters import TelegramAdapter
from agentstream_delivery.deliverer import ChatStatus
from agentstream_delivery.formatting import render
from agentstream_delivery.ledger import MemoryLedger
from agentstream_delivery.ratelimit import RateLimiter
from agentstream_delivery.render import CURSOR
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_testing.fake_platforms import Failure, FakeTelegram

LOG = structlog.get_logger("test")


def actor(adapter: TelegramAdapter, chat: str, limiter: RateLimiter, run: str) -> StreamActor:
    target = ReplyTarget(platform="telegram", chat_id=chat)
    a = StreamActor(
        StreamKey.of(run, target),
        target,
        adapter,
        LOG,
        ledger=MemoryLedger(),
        conversation_key=f"telegram:{chat}",
        gate=limiter.gate("telegram", adapter.bot, chat, adapter.capabilities.chat_interval),
    )
    a.start()
    return a


async def feed_paced(a: StreamActor, seconds: float, per_second: int, word: str = "word ") -> str:
    text = ""
    start = time.monotonic()
    for i in range(int(seconds * per_second)):
        a.feed(TextDelta("m1", word))
        text += word
        await asyncio.sleep(max(0.0, start + (i + 1) / per_second - time.monotonic()))
    a.feed(Finish("completed", text=text))
    assert a.task is not None
    await asyncio.wait_for(a.task, 30)
    return text


async def test_ten_seconds_at_fifty_deltas_per_second_make_at_most_twelve_edits():
    async with FakeTelegram(per_chat_interval=1.0) as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url)
        started = time.monotonic()
        text = await feed_paced(actor(adapter, "-10", RateLimiter(), "r1"), 10.0, 50, "ab ")  # 1,500 chars
        took = time.monotonic() - started  # 10 s, more on a loaded machine: the bound follows it
        await adapter.close()
    edits = tg.calls_to("-10", "editMessageText")
    # One edit per chat interval (1 s) of the time the stream really took, not one per delta (500).
    assert len(edits) <= took + 2, (len(edits), took)
    assert tg.count(429) == 0
    assert tg.texts("-10") == [render(text, TextFormat.TELEGRAM_HTML)]


async def test_429_pauses_only_that_chat_and_three_strikes_degrade_to_the_missing_tail():
    async with FakeTelegram() as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url)
        limiter = RateLimiter()
        rate_limit = {
            "ok": False,
            "error_code": 429,
            "description": "Too Many Requests: retry after 3",
            "parameters": {"retry_after": 3},
        }
        tg.fail_next("editMessageText", Failure(429, rate_limit), chat_id="-1")
        slow, other = actor(adapter, "-1", limiter, "r1"), actor(adapter, "-2", limiter, "r2")
        await asyncio.gather(feed_paced(slow, 6.0, 20), feed_paced(other, 6.0, 20))

        hit = next(c for c in tg.calls_to("-1") if c.status == 429)
        after = [c for c in tg.calls_to("-1") if c.at > hit.at]
        assert after and after[0].at - hit.at >= 3.0 - 0.05  # nothing reached chat -1 before retry_after
        during = [c for c in tg.calls_to("-2") if hit.at < c.at < hit.at + 3.0]
        assert len(during) >= 2  # chat -2 kept streaming meanwhile
        assert len(tg.texts("-1")) == 1 and len(tg.texts("-2")) == 1

        # three consecutive strikes: final only, exactly the missing tail at the end
        quick = dict(rate_limit, parameters={"retry_after": 0.3})
        tg.fail_next("editMessageText", Failure(429, quick), chat_id="-3", count=3)
        degraded = actor(adapter, "-3", limiter, "r3")
        text = await feed_paced(degraded, 4.0, 20)
        await adapter.close()
    assert degraded.deliverer.status is ChatStatus.DEGRADED
    first, tail = tg.messages("-3")
    assert first.text.endswith(CURSOR) and first.edits == 0  # left as it was when the strikes began
    shown = first.text.removesuffix(CURSOR)
    # The tail is the source text past what the preview showed, rendered on its own.
    assert text.startswith(shown) and tail.text == render(text[len(shown) :], TextFormat.TELEGRAM_HTML)
    assert len(tg.calls_to("-3", "sendMessage")) == 2 and len(tg.calls_to("-3", "editMessageText")) == 3
