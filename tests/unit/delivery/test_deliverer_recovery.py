"""A stream resumed from its ledger: calls cut off by a crash, replays of shown texts, reapplication."""

from __future__ import annotations

from agentstream_delivery.deliverer import FAILED, PENDING, SENDING, SENT, UNKNOWN, Delivered, Skipped
from agentstream_delivery.ledger import LedgerEntry, MemoryLedger, sha256
from agentstream_delivery.platform_ops import Edit
from tests.unit.delivery.deliverer_harness import Scripted, Wall, watched


async def test_recover_turns_calls_cut_off_by_a_crash_into_unknown():
    ledger = MemoryLedger()
    ledger.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, SENT, "id0", 3, sha256("abc"), True)
    ledger.rows[("scripted", "c", "r", 1)] = LedgerEntry(1, SENDING, "id1", 2, sha256("ab"), False, None, 2000.0)
    ledger.rows[("scripted", "c", "r", 2)] = LedgerEntry(2, SENDING, "id2", 2, sha256("ab"), False, None, 900.0)
    ledger.rows[("scripted", "c", "r", 3)] = LedgerEntry(3, SENDING, None, 2, sha256("ab"), True)
    ledger.rows[("scripted", "c", "r", 4)] = LedgerEntry(4, PENDING)
    ledger.rows[("other", "c", "r", 0)] = LedgerEntry(0, SENDING, "x", 1, sha256("x"))
    d = watched(Scripted(), ledger, wall=Wall(1000.0), late_landing_s=15.0)
    await d.recover()
    why = "delivery restarted during the call"
    assert d.entries == {
        0: LedgerEntry(0, SENT, "id0", 3, sha256("abc"), True),
        1: LedgerEntry(1, UNKNOWN, "id1", 2, sha256("ab"), False, why, 2000.0),
        2: LedgerEntry(2, UNKNOWN, "id2", 2, sha256("ab"), False, why, 1015.0),
        3: LedgerEntry(3, UNKNOWN, None, 2, sha256("ab"), True, why, None),
        4: LedgerEntry(4, PENDING),
    }
    assert ledger.rows[("scripted", "c", "r", 2)] == d.entries[2]
    assert ledger.rows[("other", "c", "r", 0)].state == SENDING
    assert d.shown() == {0: 3, 1: 0, 2: 0}


async def test_recover_of_a_cut_off_edit_without_a_due_time_sets_one():
    ledger = MemoryLedger()
    ledger.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, SENDING, "id0", 2, sha256("ab"), True)
    d = watched(Scripted(), ledger, wall=Wall(10.0), late_landing_s=15.0)
    await d.recover()
    assert d.entries[0].reapply_at == 25.0
    early = MemoryLedger()
    early.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, SENDING, "id0", 2, sha256("ab"), True)
    d = watched(Scripted(), early, wall=Wall(0.0), late_landing_s=0.5)
    await d.recover()
    assert d.entries[0].reapply_at == 0.5


async def test_a_replay_of_a_shown_text_is_skipped_and_still_reapplied_after_the_window():
    ledger = MemoryLedger()
    ledger.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, SENT, "id0", 2, sha256("ab"), True, None, 900.0)
    adapter = Scripted()
    d = watched(adapter, ledger, wall=Wall(1000.0))
    await d.recover()
    assert await d.deliver(Edit(0, "ab", True), "ab") == Skipped()
    assert adapter.calls == []
    await d.settle()
    assert adapter.calls == [("edit", "ab")] and d.entries[0].reapply_at is None


async def test_settle_without_the_text_clears_the_due_time_and_calls_nothing():
    ledger = MemoryLedger()
    ledger.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, UNKNOWN, "id0", 2, sha256("ab"), True, "t", 900.0)
    ledger.rows[("scripted", "c", "r", 1)] = LedgerEntry(1, SENT, "id1", 2, sha256("cd"), True, None, 950.0)
    adapter = Scripted()
    d = watched(adapter, ledger, wall=Wall(1000.0))
    await d.recover()
    await d.deliver(Edit(1, "cd", True), "cd")
    await d.settle()
    assert adapter.calls == [("edit", "cd")]  # segment 0's text never reached this process
    assert ledger.rows[("scripted", "c", "r", 0)].reapply_at is None
    assert ledger.rows[("scripted", "c", "r", 0)].state == UNKNOWN


async def test_a_replayed_preview_never_turns_a_final_message_back():
    ledger = MemoryLedger()
    ledger.rows[("scripted", "c", "r", 0)] = LedgerEntry(0, SENT, "id0", 3, sha256("abc"), True)
    ledger.rows[("scripted", "c", "r", 1)] = LedgerEntry(1, UNKNOWN, "id1", 3, sha256("abc"), True, "t")
    ledger.rows[("scripted", "c", "r", 2)] = LedgerEntry(2, FAILED, "id2", 3, sha256("abc"), True, "x")
    adapter = Scripted()
    d = watched(adapter, ledger)
    await d.recover()
    assert await d.deliver(Edit(0, "ab ▉", False), "ab ▉") == Skipped()
    assert await d.deliver(Edit(1, "ab ▉", False), "ab ▉") == Skipped()
    assert adapter.calls == []
    assert await d.deliver(Edit(2, "ab ▉", False), "ab ▉") == Delivered()  # a failed final is no final
    # a different final text on a finalized message is applied
    assert await d.deliver(Edit(0, "abcd", True), "abcd") == Delivered()
    assert adapter.calls == [("edit", "ab ▉"), ("edit", "abcd")]
