"""Per-chat state in delivery is bounded: idle chats and gates are forgotten, state in use is not."""

from __future__ import annotations

import asyncio
import gc

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import ChatBounds
from agentstream_delivery.adapters.memory import MemoryAdapter
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.current_runs import CurrentRuns
from agentstream_delivery.ratelimit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def web(chat: str) -> ReplyTarget:
    return ReplyTarget(platform="web", chat_id=chat)


async def test_web_chats_beyond_the_cap_are_forgotten_least_recent_first() -> None:
    adapter = WebAdapter(bounds=ChatBounds(max_chats=3, clock=Clock()))
    for chat in "abcde":
        await adapter.send(web(chat), f"hi {chat}", final=True)
    assert len(adapter) == 3
    assert adapter.messages("a") == [] and [m.text for m in adapter.messages("e")] == ["hi e"]


async def test_web_idle_chats_expire_but_open_pages_and_previews_stay() -> None:
    clock = Clock()
    adapter = WebAdapter(bounds=ChatBounds(idle_ttl_s=60, clock=clock))
    await adapter.send(web("done"), "answer", final=True)
    preview = await adapter.send(web("streaming"), "Hel ▉")
    await adapter.send(web("watched"), "answer", final=True)
    page = adapter.frames("watched")
    assert await anext(page) == b": connected\n\n"
    clock.now += 3600
    await adapter.send(web("new"), "x", final=True)
    assert adapter.messages("done") == []
    assert [m.text for m in adapter.messages("watched")] == ["answer"]
    await adapter.edit(web("streaming"), preview, "Hello!", final=True)  # the stream still finds its message
    await page.aclose()  # the page left: nothing holds the chat any more
    clock.now += 3600
    await adapter.send(web("newer"), "x", final=True)
    assert adapter.messages("watched") == [] and adapter.messages("streaming") == []
    assert len(adapter) == 1


async def test_memory_adapter_chats_are_bounded() -> None:
    adapter = MemoryAdapter(bounds=ChatBounds(max_chats=2, clock=Clock()))
    preview = await adapter.send(ReplyTarget(platform="memory", chat_id="open"), "Hel")
    for chat in "abc":
        await adapter.send(ReplyTarget(platform="memory", chat_id=chat), chat, final=True)
    assert sorted(adapter.chats()) == ["c", "open"]
    await adapter.edit(ReplyTarget(platform="memory", chat_id="open"), preview, "Hello", final=True)


async def test_idle_gates_are_forgotten() -> None:
    clock = Clock()
    limiter = RateLimiter(clock, max_gates=100, idle_ttl_s=60)
    for i in range(50):
        await limiter.gate("web", "", f"c{i}", 0.0).acquire()
    clock.now += 61
    limiter.gate("web", "", "fresh", 0.0)
    gc.collect()
    assert len(limiter) == 1


async def test_a_rate_limited_chat_keeps_its_deadline_under_eviction_pressure() -> None:
    clock = Clock()
    limiter = RateLimiter(clock, max_gates=10, idle_ttl_s=60)
    throttled = limiter.gate("telegram", "bot", "42", 1.0)
    throttled.rate_limited(retry_after=900)  # a 429: no call before now + 900
    deadline = throttled.next_at
    del throttled
    for i in range(1000):
        clock.now += 0.5
        limiter.gate("telegram", "bot", f"other{i}", 0.0)
    gc.collect()
    assert len(limiter) <= 11
    again = limiter.gate("telegram", "bot", "42", 1.0)
    assert again.next_at == deadline and again.strikes == 1
    clock.now = deadline + 1  # past the deadline and idle: now it may go
    for i in range(20):
        limiter.gate("telegram", "bot", f"late{i}", 0.0)
    del again
    gc.collect()
    assert limiter.gate("telegram", "bot", "42", 1.0).strikes == 0


async def test_a_gate_held_by_a_stream_is_never_doubled() -> None:
    clock = Clock()
    limiter = RateLimiter(clock, max_gates=1, idle_ttl_s=60)
    held = limiter.gate("web", "", "busy", 0.0)  # a stream keeps it for its lifetime
    clock.now += 120
    for i in range(5):
        limiter.gate("web", "", f"c{i}", 0.0)
    assert limiter.gate("web", "", "busy", 0.0) is held


async def test_a_gate_with_a_waiting_stream_is_kept() -> None:
    clock = Clock()
    limiter = RateLimiter(clock, max_gates=1, idle_ttl_s=60)
    gate = limiter.gate("web", "", "busy", 0.0)
    async with gate._lock:  # a stream is taking the chat's slot
        clock.now += 120
        limiter.gate("web", "", "other", 0.0)
        assert "busy" in {key[2] for key in limiter._gates}
    await asyncio.sleep(0)


def test_the_current_run_of_a_conversation_is_forgotten_only_once_over() -> None:
    currency = CurrentRuns(limit=3)
    currency.start("open", "run-open")
    for i in range(10):
        currency.start(f"conv{i}", f"run{i}")
        currency.end(f"run{i}")
    assert len(currency._current) <= 4
    assert currency.start("open", "run-next") == "run-open"  # still current: superseded, not forgotten
