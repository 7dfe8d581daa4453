"""Notices: one final message each, sent exactly once, reapplied after the late-landing window."""

from __future__ import annotations

import time

import structlog
from structlog.testing import capture_logs

from agentstream.contracts import DeliveryReceipt, Notice
from agentstream_delivery.adapters.base import NotFound, OutcomeUnknown, TooLong
from agentstream_delivery.deliverer import REAPPLY_ROUNDS, SENDING, SENT, Delivered, Failed, Skipped, deliver_notice
from agentstream_delivery.ledger import LedgerEntry, MemoryLedger, sha256
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.ratelimit import ChatGate
from tests.unit.delivery.deliverer_harness import TARGET, Drafting, Scripted, Wall, calls, metrics, watched


def notice(text: str) -> Notice:
    return Notice(run_id="n-run", root_run_id="n-run", conversation_key="k", seq=0, text=text)


async def test_a_notice_is_one_final_message_sent_exactly_once():
    sent: list[DeliveryReceipt] = []

    async def sink(receipt: DeliveryReceipt) -> None:
        if receipt.state == SENT:
            sent.append(receipt)

    ledger = MemoryLedger(sink)
    adapter = Drafting("id1")  # even where previews are drafts, a notice is a message
    n = notice("Started a new conversation.")
    observe, registry = metrics()
    log = structlog.get_logger("test")
    late = 7.0
    out = await deliver_notice(n, TARGET, n.text, adapter, ChatGate(0.0), ledger, log, observe, late_landing_s=late)
    assert out == Delivered()
    assert adapter.calls == [("send", n.text)] and adapter.drafts == []
    assert adapter.targets == [TARGET] and adapter.asked == [TARGET]
    [receipt] = sent
    assert (receipt.conversation_key, receipt.root_run_id, receipt.segment) == ("k", n.id, 0)
    entry = ledger.rows[("scripted", "c", n.id, 0)]
    assert entry == LedgerEntry(0, SENT, "id1", len(n.text), sha256(n.text), True)
    assert calls(registry, "send", "ok") == 1
    # a replay of the same notice record after a restart leaves the landed message alone
    again = await deliver_notice(n, TARGET, n.text, adapter, ChatGate(0.0), ledger, log, late_landing_s=late)
    assert again == Skipped() and len(adapter.calls) == 1


async def test_a_notice_cut_off_mid_call_is_reapplied_after_the_late_landing_window():
    ledger = MemoryLedger()
    n = notice("ok")
    ledger.rows[("scripted", "c", n.id, 0)] = LedgerEntry(0, SENDING, "id1", 2, sha256("ok"), True)
    adapter = Scripted()
    log = structlog.get_logger("test")
    started = time.monotonic()
    out = await deliver_notice(n, TARGET, "ok", adapter, ChatGate(0.0), ledger, log, late_landing_s=0.3)
    assert out == Delivered() and adapter.calls == [("edit", "ok"), ("edit", "ok")]
    assert time.monotonic() - started >= 0.3
    assert ledger.rows[("scripted", "c", n.id, 0)].reapply_at is None


async def test_a_notice_that_fails_is_reported_failed():
    n = notice("x")
    adapter = Scripted(TooLong("too long"))
    with capture_logs() as logs:
        out = await deliver_notice(
            n, TARGET, "x", adapter, ChatGate(0.0), MemoryLedger(), structlog.get_logger("t"), late_landing_s=1.0
        )
    assert out == Failed()
    [warning] = [e for e in logs if e["event"] == "notice not delivered"]
    assert (warning["notice_id"], warning["platform"], warning["chat_id"]) == (n.id, "scripted", "c")


async def test_reapplications_that_keep_timing_out_stop_after_a_bounded_number_of_rounds():
    wall = Wall(1000.0)
    adapter = Scripted("id1", *[OutcomeUnknown("timeout"), "ok"] * 10)
    d = watched(adapter, MemoryLedger(), wall=wall, late_landing_s=0.01)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    await d.deliver(Edit(0, "ab", True), "ab")
    assert len(adapter.calls) == 3
    await d.settle()
    assert len(adapter.calls) == 3 + 2 * REAPPLY_ROUNDS  # each round: a timeout and its repeat
    assert d.entries[0].state == SENT and d.entries[0].reapply_at is not None


async def test_a_message_deleted_before_its_reapplication_is_posted_again_in_its_segment():
    adapter = Scripted("id1", OutcomeUnknown("timeout"), "ok", NotFound("gone"), "id2")
    d = watched(adapter, MemoryLedger(), wall=Wall(1000.0), late_landing_s=0.01)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    await d.deliver(Edit(0, "ab", True), "ab")
    await d.settle()
    assert adapter.calls[-2:] == [("edit", "ab"), ("send", "ab")]
    assert list(d.entries) == [0] and d.message_id(0) == "id2" and d.entries[0].final
