"""100,000 distinct chats through the web adapter and the rate-limit gates: RSS stays bounded.

Before the bound, 300 chats cost ~7.8 MB (a 512 Mi pod died at ~20k chats). Every chat
here gets a preview, edits and a final (the shape of one streamed answer), its gate is
taken and released, and its run becomes current and ends; the figure is printed
(`pytest -s`) for the record.
"""

from __future__ import annotations

import gc
import os
import resource

import pytest

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.current_runs import CurrentRuns
from agentstream_delivery.ratelimit import MAX_GATES, RateLimiter

CHATS = 100_000
MAX_GROWTH_MB = 50.0
ANSWER = "Here is a reasonably long streamed answer, the kind a user actually gets back. " * 4


def rss_mb() -> float:
    with open("/proc/self/statm") as f:  # second field: resident pages
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.timeout(60)  # 100k chats on purpose
async def test_100k_chats_grow_rss_by_a_bounded_amount() -> None:
    web = WebAdapter()
    limiter = RateLimiter()
    current_runs = CurrentRuns()
    gap = web.capabilities.chat_interval

    async def one_chat(i: int) -> None:
        target = ReplyTarget(platform="web", chat_id=f"chat-{i}")
        gate = limiter.gate("web", "", target.chat_id, gap)
        current_runs.start(f"web:chat-{i}", f"run-{i}")
        await gate.acquire()
        mid = await web.send(target, ANSWER[:40] + " ▉")
        gate.succeeded()
        await gate.acquire()
        await web.edit(target, mid, ANSWER[:120] + " ▉")
        gate.succeeded()
        await gate.acquire()
        await web.edit(target, mid, ANSWER, final=True)
        gate.succeeded()
        current_runs.end(f"run-{i}")

    for i in range(2_000):  # warm up allocator and caches so the baseline is not the empty process
        await one_chat(-i - 1)
    gc.collect()
    before = rss_mb()
    for i in range(CHATS):
        await one_chat(i)
    gc.collect()
    after = rss_mb()
    growth = after - before
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"\n{CHATS} chats: RSS {before:.1f} MB -> {after:.1f} MB (+{growth:.1f} MB), peak {peak_mb:.1f} MB; "
        f"web chats kept {len(web)}, gates kept {len(limiter)}"
    )
    assert len(web) <= web.bounds.max_chats and len(limiter) <= MAX_GATES
    assert growth < MAX_GROWTH_MB
