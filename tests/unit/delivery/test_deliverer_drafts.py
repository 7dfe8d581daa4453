"""Drafts: previews in Telegram private chats streamed as drafts, the final as a message."""

from __future__ import annotations

import zlib

from agentstream.config import TextFormat
from agentstream_delivery.adapters.base import BadFormat, RateLimited
from agentstream_delivery.deliverer import SENT, ChatStatus, Delivered, Skipped
from agentstream_delivery.ledger import LedgerEntry, MemoryLedger, sha256
from agentstream_delivery.platform_ops import Edit, Send
from tests.unit.delivery.deliverer_harness import (
    TARGET,
    Drafting,
    DraftingHtml,
    Receipts,
    calls,
    jumping,
    metrics,
    timed,
    watched,
)


async def test_previews_in_a_private_chat_are_drafts_and_the_final_is_a_message():
    adapter = Drafting("id1")
    observe, registry = metrics()
    receipts = Receipts()
    d = watched(adapter, MemoryLedger(receipts), observe)
    assert adapter.asked == [TARGET] and d.status is ChatStatus.DRAFTING
    assert await d.deliver(Send(0, "a ▉", False), "a ▉") == Delivered()
    assert await d.deliver(Send(1, "b ▉", False), "b ▉") == Delivered()
    assert adapter.drafts == [
        (zlib.crc32(b"r:0"), "a ▉", TextFormat.MARKDOWN),
        (zlib.crc32(b"r:1"), "b ▉", TextFormat.MARKDOWN),
    ]
    assert adapter.calls == [] and receipts.states == []  # a draft is no message: no ledger row
    assert adapter.targets == [TARGET, TARGET]
    assert calls(registry, "draft", "ok") == 2 and timed(registry, "draft") == 0
    assert await d.deliver(Edit(0, "ab", True), "ab") == Delivered()
    assert adapter.calls == [("send", "ab")] and len(adapter.drafts) == 2
    # progress lines and notices are messages of their own, never drafts
    assert await d.deliver(Send(2, "🔧 search", False, role="progress"), "🔧 search") == Delivered()
    assert adapter.calls[-1] == ("send", "🔧 search") and len(adapter.drafts) == 2


async def test_a_chat_without_drafts_edits_its_previews():
    adapter = Drafting("id1", private=False)
    d = watched(adapter, MemoryLedger())
    assert d.status is ChatStatus.EDITING
    assert await d.deliver(Send(0, "a ▉", False), "a ▉") == Delivered()
    assert adapter.drafts == [] and adapter.calls == [("send", "a ▉")]


async def test_a_failed_draft_falls_back_to_messages_for_the_rest_of_the_run():
    adapter = Drafting("id1", "ok", drafts=[BadFormat("no drafts here")])
    observe, registry = metrics()
    d = watched(adapter, MemoryLedger(), observe)
    assert await d.deliver(Send(0, "a ▉", False), "a ▉") == Delivered()
    assert d.status is ChatStatus.EDITING and adapter.calls == [("send", "a ▉")]
    assert await d.deliver(Edit(0, "ab ▉", False), "ab ▉") == Delivered()
    assert adapter.calls[-1] == ("edit", "ab ▉") and len(adapter.drafts) == 1
    assert calls(registry, "draft", "error") == 1


async def test_a_rate_limited_draft_is_skipped_and_counts_a_strike():
    adapter = Drafting(drafts=[RateLimited(0.0)])
    observe, registry = metrics()
    d = watched(adapter, MemoryLedger(), observe)
    d.gate.clock = jumping()  # the backoff after the strike never holds this test up
    assert await d.deliver(Send(0, "a ▉", False), "a ▉") == Skipped()
    assert d.gate.strikes == 1 and d.status is ChatStatus.DRAFTING and adapter.calls == []
    assert calls(registry, "draft", "rate_limited") == 1
    assert await d.deliver(Send(0, "ab ▉", False), "ab ▉") == Delivered()
    assert d.gate.strikes == 0  # a draft that lands clears the strikes


async def test_a_previewed_message_in_a_drafting_chat_is_edited_not_drafted():
    ledger = MemoryLedger()
    ledger.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, SENT, "id0", 3, sha256("a ▉"), False)
    adapter = Drafting()
    d = watched(adapter, ledger)
    await d.recover()
    assert await d.deliver(Edit(0, "ab ▉", False), "ab ▉") == Delivered()
    assert adapter.calls == [("edit", "ab ▉")] and adapter.drafts == []


async def test_a_draft_is_rendered_as_a_preview_with_its_dangling_markup_closed():
    adapter = DraftingHtml()
    d = watched(adapter, MemoryLedger())
    assert await d.deliver(Send(0, "**bo ▉", False), "**bo ▉") == Delivered()
    [(_, text, markup)] = adapter.drafts
    assert (text, markup) == ("<b>bo</b> ▉", TextFormat.TELEGRAM_HTML)
