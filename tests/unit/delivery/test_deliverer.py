"""Platform errors are classified per platform and handled per class by the deliverer; each outcome
of a platform call as the ledger and the metrics see it."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
import structlog

from agentstream.config import TextFormat
from agentstream_delivery.adapters.base import (
    DELIVERING_RUN,
    AdapterError,
    BadFormat,
    Capabilities,
    Forbidden,
    FormattingRejected,
    NotFound,
    OutcomeUnknown,
    RateLimited,
    TooLong,
    Transient,
)
from agentstream_delivery.adapters.telegram import classify
from agentstream_delivery.deliverer import (
    FAILED,
    PENDING,
    SENDING,
    SENT,
    UNKNOWN,
    ChatStatus,
    Dead,
    Degraded,
    Delivered,
    Deliverer,
    Failed,
    Skipped,
)
from agentstream_delivery.ledger import LedgerEntry, MemoryLedger, sha256
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.ratelimit import ChatGate
from tests.unit.delivery.deliverer_harness import (
    SCOPE,
    TARGET,
    Receipts,
    Scripted,
    Wall,
    Watched,
    calls,
    deliverer,
    jumping,
    metrics,
    timed,
    watched,
    writes,
)


@pytest.mark.parametrize(
    ("status", "description", "kind"),
    [
        (429, "Too Many Requests: retry after 5", RateLimited),
        (400, "Bad Request: message is too long", TooLong),
        (400, "Bad Request: message to edit not found", NotFound),
        (400, "Bad Request: can't parse entities: Unsupported start tag", FormattingRejected),
        (400, "Bad Request: message text is empty", BadFormat),
        (403, "Forbidden: bot was blocked by the user", Forbidden),
        (502, "Bad Gateway", Transient),
    ],
)
def test_telegram_errors_are_classified(status: int, description: str, kind: type[AdapterError]):
    err = classify(
        status, {"ok": False, "error_code": status, "description": description, "parameters": {"retry_after": 5}}
    )
    assert type(err) is kind
    if isinstance(err, RateLimited):
        assert err.retry_after == 5.0


async def test_deleted_message_is_posted_again():
    adapter = Scripted("id1", NotFound("gone"), "id2")
    d = deliverer(adapter)
    assert await d.deliver(Send(0, "a ▉", False), "a ▉") == Delivered()
    assert await d.deliver(Edit(0, "ab", True), "ab") == Delivered()
    assert adapter.calls == [("send", "a ▉"), ("edit", "ab"), ("send", "ab")]
    assert d.entries[0].message_id == "id2" and d.entries[0].state == "sent"


async def test_transient_is_retried_and_too_long_fails_without_retry():
    adapter = Scripted(Transient("502"), "id1", TooLong("too long"))
    d = deliverer(adapter)
    assert await d.deliver(Send(0, "x", True), "x") == Delivered()
    assert await d.deliver(Send(1, "y" * 5000, True), "y" * 5000) == Failed()
    assert len(adapter.calls) == 3 and d.entries[1].state == "failed"


async def test_forbidden_ends_every_later_call():
    adapter = Scripted(Forbidden("blocked"))
    d = deliverer(adapter)
    assert await d.deliver(Send(0, "x", True), "x") == Dead()
    assert d.status is ChatStatus.DEAD and d.entries[0].state == "failed"
    assert await d.deliver(Send(1, "y", True), "y") == Dead()
    assert len(adapter.calls) == 1


class ScriptedTelegramHtml(Scripted):
    capabilities = Capabilities(edit_interval=1.0, formatting=TextFormat.TELEGRAM_HTML)


async def test_a_refused_markup_is_sent_again_as_plain_text_and_recorded_as_sent():
    adapter = ScriptedTelegramHtml(FormattingRejected("Bad Request: can't parse entities"), "id1", "ok")
    d = deliverer(adapter)
    answer = "**Done** with [docs](https://example.com) & `x<y`"
    assert await d.deliver(Send(0, answer, True), answer) == Delivered()
    assert adapter.calls == [
        ("send", '<b>Done</b> with <a href="https://example.com">docs</a> &amp; <code>x&lt;y</code>'),
        ("send", "Done with docs (https://example.com) & x<y"),
    ]
    assert adapter.markups == [TextFormat.TELEGRAM_HTML, TextFormat.PLAIN]
    assert d.entries[0].state == "sent" and d.entries[0].message_id == "id1"
    # The next frame tries the markup again: one refusal says nothing about the next text.
    assert await d.deliver(Edit(0, answer + "!", True), answer + "!") == Delivered()
    assert adapter.markups[-1] is TextFormat.TELEGRAM_HTML


async def test_a_plain_text_refusal_is_a_failure_not_a_loop():
    adapter = ScriptedTelegramHtml(FormattingRejected("can't parse entities"), FormattingRejected("again"))
    d = deliverer(adapter)
    assert await d.deliver(Send(0, "*x*", True), "*x*") == Failed()
    assert adapter.markups == [TextFormat.TELEGRAM_HTML, TextFormat.PLAIN]
    assert d.entries[0].state == "failed"


async def test_three_rate_limit_strikes_degrade_and_drop_previews():
    adapter = Scripted("id1", *(RateLimited(0.0) for _ in range(3)))
    d = deliverer(adapter)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    # The outcome says what the platform shows: "a" of message 0 (cursor excluded).
    assert await d.deliver(Edit(0, "ab ▉", False), "ab ▉") == Degraded({0: 1})
    assert d.status is ChatStatus.DEGRADED
    assert await d.deliver(Edit(0, "abc ▉", False), "abc ▉") == Skipped()
    assert len(adapter.calls) == 4  # the dropped preview never reached the platform


# -- each outcome of a platform call, as the ledger and the metrics see it ------------------------
async def test_a_delivered_send_writes_pending_then_sending_then_sent():
    receipts = Receipts()
    ledger = MemoryLedger(receipts)
    adapter = Watched(ledger, "id1")
    observe, registry = metrics()
    d = watched(adapter, ledger, observe)
    assert await d.deliver(Send(0, "hi ▉", False), "hi ▉") == Delivered()
    assert receipts.states == [(0, PENDING, None), (0, SENDING, None), (0, SENT, None)]
    # the row says `sending`, with the text going out, while the request is on its way
    [at_call] = adapter.rows_at_call
    assert at_call == LedgerEntry(0, SENDING, None, len("hi ▉"), sha256("hi ▉"), False)
    assert ledger.rows[("scripted", "c", "r", 0)] == LedgerEntry(0, SENT, "id1", 4, sha256("hi ▉"), False)
    assert adapter.runs == ["r"] and DELIVERING_RUN.get() is None
    assert d.message_id(0) == "id1" and d.message_id(1) is None
    assert d.shown() == {0: len("hi")}
    assert calls(registry, "send", "ok") == 1 and timed(registry, "send") == 1
    seconds = {"platform": "scripted", "op": "send"}
    assert (registry.get_sample_value("agentstream_delivery_platform_call_seconds_sum", seconds) or -1) >= 0  # measured
    assert writes(registry, "pending") == writes(registry, "sending") == writes(registry, "sent") == 1
    # the final edit: the same message, its full text shown
    assert await d.deliver(Edit(0, "hi there", True), "hi there") == Delivered()
    assert adapter.calls[-1] == ("edit", "hi there")
    assert adapter.rows_at_call[-1] == LedgerEntry(0, SENDING, "id1", 8, sha256("hi there"), True)
    assert d.entries[0] == LedgerEntry(0, SENT, "id1", 8, sha256("hi there"), True)
    assert d.shown() == {0: 8}
    assert calls(registry, "edit", "ok") == 1 and timed(registry, "edit") == 1


async def test_a_rate_limited_call_restores_the_row_and_is_retried_after_retry_after():
    receipts = Receipts()
    ledger = MemoryLedger(receipts)
    adapter = Watched(ledger, RateLimited(0.2), "id1")
    observe, registry = metrics()
    d = watched(adapter, ledger, observe)
    started = time.monotonic()
    assert await d.deliver(Send(0, "hi ▉", False), "hi ▉") == Delivered()
    assert time.monotonic() - started >= 0.2  # the chat's gate held the retry back
    assert [s for _, s, _ in receipts.states] == [PENDING, SENDING, PENDING, SENDING, SENT]
    assert adapter.rows_at_call[1] is not None and adapter.rows_at_call[1].state == SENDING
    assert d.status is ChatStatus.EDITING and d.gate.strikes == 0
    assert calls(registry, "send", "rate_limited") == 1 and calls(registry, "send", "ok") == 1
    assert writes(registry, "pending") == 2


async def test_a_rate_limited_edit_keeps_the_message_row_it_had():
    ledger = MemoryLedger()
    adapter = Watched(ledger, "id1", RateLimited(0.0), "ok")
    observe, registry = metrics()
    d = watched(adapter, ledger, observe)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    before = d.entries[0]
    assert await d.deliver(Edit(0, "ab ▉", False), "ab ▉") == Delivered()
    assert adapter.rows_at_call[2] == replace(before.with_text(SENDING, "ab ▉", False))
    assert adapter.calls == [("send", "a ▉"), ("edit", "ab ▉"), ("edit", "ab ▉")]
    assert calls(registry, "edit", "rate_limited") == 1


async def test_a_degraded_stream_still_delivers_its_final_after_the_strikes():
    adapter = Scripted("id1", *(RateLimited(0.0) for _ in range(3)), "ok")
    observe, registry = metrics()
    d = watched(adapter, MemoryLedger(), observe)
    d.gate.clock = jumping()  # the backoff after each strike never holds this test up
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    assert await d.deliver(Edit(0, "abc", True), "abc") == Degraded({0: 3})
    assert adapter.calls[-1] == ("edit", "abc") and len(adapter.calls) == 5
    assert d.entries[0].state == SENT and d.entries[0].final
    assert registry.get_sample_value("agentstream_delivery_degraded_streams_total", {"platform": "scripted"}) == 1
    # later finals still go out; a later strike does not count the stream degraded again
    assert await d.deliver(Send(1, "more", True), "more") == Delivered()
    assert d.shown() == {0: 3, 1: 4}


async def test_transient_errors_and_dropped_connections_restore_the_row_and_retry():
    receipts = Receipts()
    ledger = MemoryLedger(receipts)
    adapter = Watched(ledger, ConnectionError("reset"), "id1")
    observe, registry = metrics()
    d = watched(adapter, ledger, observe)
    assert await d.deliver(Send(0, "x", True), "x") == Delivered()
    assert [s for _, s, _ in receipts.states] == [PENDING, SENDING, PENDING, SENDING, SENT]
    assert calls(registry, "send", "transient") == 1


async def test_a_send_that_is_not_found_fails_with_its_reason():
    receipts = Receipts()
    adapter = Scripted(NotFound("chat gone"))
    observe, registry = metrics()
    d = watched(adapter, MemoryLedger(receipts), observe)
    assert await d.deliver(Send(0, "x", True), "x") == Failed()
    assert receipts.states[-1] == (0, FAILED, "not_found: chat gone")
    assert len(adapter.calls) == 1 and calls(registry, "send", "not_found") == 1


async def test_a_deleted_message_gets_a_fresh_row_before_it_is_posted_again():
    receipts = Receipts()
    ledger = MemoryLedger(receipts)
    adapter = Watched(ledger, "id1", NotFound("gone"), "id2")
    observe, registry = metrics()
    d = watched(adapter, ledger, observe)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    assert await d.deliver(Edit(0, "ab", True), "ab") == Delivered()
    assert [s for _, s, _ in receipts.states][3:] == [SENDING, PENDING, SENDING, SENT]
    assert adapter.rows_at_call[2] == LedgerEntry(0, SENDING, None, 2, sha256("ab"), True)
    assert calls(registry, "edit", "not_found") == 1 and calls(registry, "send", "ok") == 2


async def test_forbidden_marks_the_chat_dead_and_settle_calls_nothing():
    receipts = Receipts()
    observe, registry = metrics()
    adapter = Scripted("id1", OutcomeUnknown("timeout"), Forbidden("blocked"))
    d = watched(adapter, MemoryLedger(receipts), observe, wall=Wall())
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    assert await d.deliver(Edit(0, "ab", True), "ab") == Dead()
    assert receipts.states[-1] == (0, FAILED, "forbidden: blocked")
    assert calls(registry, "edit", "forbidden") == 1
    await d.settle()  # a re-application is due, but nothing reaches a dead chat
    assert len(adapter.calls) == 3


async def test_an_adapter_bug_fails_the_op_and_the_next_op_may_land():
    receipts = Receipts()
    adapter = Scripted(KeyError("bug"), "id2")
    observe, registry = metrics()
    d = watched(adapter, MemoryLedger(receipts), observe)
    assert await d.deliver(Send(0, "x", True), "x") == Failed()
    assert receipts.states[-1] == (0, FAILED, "error: KeyError('bug')")
    assert calls(registry, "send", "error") == 1
    assert await d.deliver(Send(1, "y", True), "y") == Delivered()


async def test_a_refused_markup_is_counted_and_waits_for_the_gate_again():
    adapter = ScriptedTelegramHtml(FormattingRejected("can't parse entities"), "id1")
    observe, registry = metrics()
    d = watched(adapter, MemoryLedger(), observe)
    d.gate.min_gap = 0.2
    started = time.monotonic()
    assert await d.deliver(Send(0, "*x*", True), "*x*") == Delivered()
    assert time.monotonic() - started >= 0.2  # the plain resend is a call of its own in the chat's budget
    assert calls(registry, "send", "formatting_rejected") == 1 and calls(registry, "send", "ok") == 1


async def test_an_edit_of_unknown_outcome_is_repeated_and_reapplied_after_the_late_landing_window():
    receipts = Receipts()
    ledger = MemoryLedger(receipts)
    wall = Wall(1000.0)
    adapter = Watched(ledger, "id1", OutcomeUnknown("timeout"), "ok", "ok")
    observe, registry = metrics()
    d = watched(adapter, ledger, observe, wall=wall, late_landing_s=5.0)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    assert await d.deliver(Edit(0, "ab", True), "ab") == Delivered()
    assert adapter.calls == [("send", "a ▉"), ("edit", "ab"), ("edit", "ab")]  # repeated at once
    assert receipts.states[4] == (0, UNKNOWN, "timeout")
    assert adapter.rows_at_call[2] == LedgerEntry(0, SENDING, "id1", 2, sha256("ab"), True, None, 1005.0)
    assert d.entries[0] == LedgerEntry(0, SENT, "id1", 2, sha256("ab"), True, None, 1005.0)
    assert calls(registry, "edit", "unknown") == 1 and writes(registry, "unknown") == 1
    wall.now = 1004.5  # half a second before the window closes: settle waits for it
    started = time.monotonic()
    await d.settle()
    assert time.monotonic() - started >= 0.5
    assert adapter.calls[-1] == ("edit", "ab") and len(adapter.calls) == 4
    assert adapter.runs == ["r"] * 4  # the re-application is the run's call too
    assert d.entries[0] == LedgerEntry(0, SENT, "id1", 2, sha256("ab"), True)
    await d.settle()  # the last word was said
    assert len(adapter.calls) == 4


async def test_a_repeat_that_left_after_the_window_needs_no_reapplication():
    wall = Wall(1000.0)
    adapter = Scripted("id1", OutcomeUnknown("timeout"), "ok")

    class Slow(ChatGate):
        async def acquire(self) -> None:
            wall.now += 10.0  # the repeat leaves after the late-landing window
            await super().acquire()

    d = Deliverer(SCOPE, TARGET, adapter, Slow(0.0), MemoryLedger(), structlog.get_logger("t"), wall=wall)
    d.late_landing_s = 5.0
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    assert await d.deliver(Edit(0, "ab", True), "ab") == Delivered()
    assert d.entries[0].reapply_at is None
    await d.settle()
    assert len(adapter.calls) == 3


async def test_edits_that_never_answer_give_up_after_a_bounded_number_of_calls():
    receipts = Receipts()
    adapter = Scripted("id1", *(OutcomeUnknown("timeout") for _ in range(20)))
    d = watched(adapter, MemoryLedger(receipts), wall=Wall())
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    assert await d.deliver(Edit(0, "ab", True), "ab") == Failed()
    assert len(adapter.calls) == 1 + 12
    assert receipts.states[-1] == (0, FAILED, "error: too many attempts")


async def test_a_final_send_of_unknown_outcome_goes_out_once_more_as_a_new_message():
    receipts = Receipts()
    adapter = Scripted(OutcomeUnknown("timeout"), "id2")
    d = watched(adapter, MemoryLedger(receipts))
    assert await d.deliver(Send(0, "done", True), "done") == Delivered()
    assert adapter.calls == [("send", "done"), ("send", "done")]
    assert receipts.states[2] == (0, UNKNOWN, "timeout")
    assert d.entries[0] == LedgerEntry(0, SENT, "id2", 4, sha256("done"), True)


async def test_a_final_send_unknown_twice_is_not_sent_a_third_time():
    receipts = Receipts()
    adapter = Scripted(OutcomeUnknown("t1"), OutcomeUnknown("t2"))
    d = watched(adapter, MemoryLedger(receipts))
    assert await d.deliver(Send(0, "done", True), "done") == Failed()
    assert len(adapter.calls) == 2
    assert d.entries[0] == LedgerEntry(0, UNKNOWN, None, 4, sha256("done"), True, "t2")


async def test_a_preview_send_of_unknown_outcome_is_left_for_the_next_text():
    adapter = Scripted(OutcomeUnknown("timeout"), "id2")
    d = watched(adapter, MemoryLedger())
    assert await d.deliver(Send(0, "a ▉", False), "a ▉") == Failed()
    assert d.entries[0] == LedgerEntry(0, UNKNOWN, None, 3, sha256("a ▉"), False, "timeout")
    assert d.shown() == {}
    # the next text goes out as a new message: the orphan has no id to edit
    assert await d.deliver(Edit(0, "ab", True), "ab") == Delivered()
    assert adapter.calls[-1] == ("send", "ab") and d.message_id(0) == "id2"


async def test_a_repeat_leaving_right_at_the_end_of_a_zero_window_needs_no_reapplication():
    adapter = Scripted("id1", OutcomeUnknown("timeout"), "ok")
    d = watched(adapter, MemoryLedger(), wall=Wall(1000.0), late_landing_s=0.0)
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    await d.deliver(Edit(0, "ab", True), "ab")
    assert d.entries[0].reapply_at is None
    await d.settle()
    assert len(adapter.calls) == 3


async def test_a_final_keeps_its_markup_as_written_and_a_refused_edit_is_edited_again_as_plain_text():
    adapter = ScriptedTelegramHtml("id1", FormattingRejected("can't parse entities"), "ok")
    d = watched(adapter, MemoryLedger())
    # a final is rendered as it is: only a preview's dangling markup is closed
    assert await d.deliver(Send(0, "2 **bo", True), "2 **bo") == Delivered()
    assert adapter.calls == [("send", "2 **bo")]
    assert await d.deliver(Edit(0, "*x*", True), "*x*") == Delivered()
    assert adapter.calls[1:] == [("edit", "<i>x</i>"), ("edit", "x")]
    assert adapter.finals == [True, True, True] and d.message_id(0) == "id1"


async def test_a_final_whose_markup_the_message_shows_already_is_recorded_without_a_call():
    adapter = ScriptedTelegramHtml("id1")
    d = deliverer(adapter)
    assert await d.deliver(Send(0, "**x** ▉", False), "**x** ▉") == Delivered()
    # Other Markdown, the same markup: Telegram would refuse the edit ("message is not modified").
    assert await d.deliver(Edit(0, "**x** ▉\n\n", True), "**x** ▉\n\n") == Delivered()
    assert adapter.calls == [("send", "<b>x</b> ▉")]
    assert d.entries[0].state == "sent" and d.entries[0].final and d.texts[0] == "**x** ▉\n\n"


async def test_a_message_showing_the_plain_fallback_still_gets_the_markup():
    adapter = ScriptedTelegramHtml(FormattingRejected("Bad Request: can't parse entities"), "id1", "ok")
    d = deliverer(adapter)
    assert await d.deliver(Send(0, "**x** ▉", False), "**x** ▉") == Delivered()
    assert await d.deliver(Edit(0, "**x** ▉\n\n", True), "**x** ▉\n\n") == Delivered()
    assert adapter.calls == [("send", "<b>x</b> ▉"), ("send", "x ▉"), ("edit", "<b>x</b> ▉")]
