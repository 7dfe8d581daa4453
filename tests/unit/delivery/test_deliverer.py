"""Platform errors are classified per platform and handled per class by the deliverer."""

from __future__ import annotations

import itertools
import time
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from agentstream.config import TextFormat
from agentstream.contracts import DeliveryReceipt, LedgerState, Notice, ReplyTarget
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
    REAPPLY_ROUNDS,
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
    deliver_notice,
)
from agentstream_delivery.delivery_metrics import DeliveryMetrics
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, MemoryLedger, sha256
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.ratelimit import ChatGate

TARGET = ReplyTarget(platform="scripted", chat_id="c")


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


class Scripted:
    """An adapter that answers each call with the next scripted outcome (an error or an id)."""

    platform = "scripted"
    capabilities = Capabilities(edit_interval=1.0)
    bot = ""
    timeout = None

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[tuple[str, str]] = []
        self.markups: list[TextFormat] = []  # what each call's text was written in
        self.targets: list[ReplyTarget] = []
        self.finals: list[bool] = []

    async def _next(self, kind: str, text: str) -> str:
        self.calls.append((kind, text))
        out = self.outcomes.pop(0) if self.outcomes else "ok"
        if isinstance(out, Exception):
            raise out
        return str(out)

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        self.markups.append(markup)
        self.targets.append(target)
        self.finals.append(final)
        return await self._next("send", text)

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        self.markups.append(markup)
        self.targets.append(target)
        self.finals.append(final)
        await self._next("edit", text)

    async def close(self) -> None:
        pass


def deliverer(adapter: Scripted) -> Deliverer:
    return Deliverer(
        LedgerScope("scripted", "c", "r", "k"),
        TARGET,
        adapter,
        ChatGate(0.0),
        MemoryLedger(),
        structlog.get_logger("test"),
    )


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
SCOPE = LedgerScope("scripted", "c", "r", "k")


class Watched(Scripted):
    """A scripted adapter that notes, at each call, the ledger row and the run being delivered."""

    def __init__(self, ledger: MemoryLedger, *outcomes: object) -> None:
        super().__init__(*outcomes)
        self.ledger = ledger
        self.rows_at_call: list[LedgerEntry | None] = []
        self.runs: list[str | None] = []

    async def _next(self, kind: str, text: str) -> str:
        self.rows_at_call.append(self.ledger.rows.get(("scripted", "c", "r", 0)))
        self.runs.append(DELIVERING_RUN.get())
        return await super()._next(kind, text)


class Receipts:
    def __init__(self) -> None:
        self.states: list[tuple[int, LedgerState, str | None]] = []

    async def __call__(self, receipt: DeliveryReceipt) -> None:
        self.states.append((receipt.segment, receipt.state, receipt.error))


class Wall:
    """The deliverer's epoch clock, moved by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def jumping() -> Callable[[], float]:
    """A gate clock that moves a minute on each reading: no backoff ever holds a test up."""
    ticks = itertools.count(0.0, 60.0)
    return lambda: next(ticks)


def metrics() -> tuple[DeliveryMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    return DeliveryMetrics(registry), registry


def calls(registry: CollectorRegistry, op: str, outcome: str) -> float:
    labels = {"platform": "scripted", "op": op, "outcome": outcome}
    return registry.get_sample_value("agentstream_delivery_platform_calls_total", labels) or 0.0


def timed(registry: CollectorRegistry, op: str) -> float:
    labels = {"platform": "scripted", "op": op}
    return registry.get_sample_value("agentstream_delivery_platform_call_seconds_count", labels) or 0.0


def writes(registry: CollectorRegistry, state: str) -> float:
    return registry.get_sample_value("agentstream_delivery_ledger_writes_total", {"state": state}) or 0.0


def watched(adapter: Scripted, ledger: MemoryLedger, observe: DeliveryMetrics | None = None, **kw: Any) -> Deliverer:
    return Deliverer(SCOPE, TARGET, adapter, ChatGate(0.0), ledger, structlog.get_logger("test"), observe, **kw)


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
    assert 0 <= (registry.get_sample_value("agentstream_delivery_platform_call_seconds_sum", seconds) or -1) < 5
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


# -- a stream resumed from its ledger ------------------------------------------------------------
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


# -- drafts (previews in Telegram private chats) -------------------------------------------------
class Drafting(Scripted):
    """A scripted adapter that streams drafts to the chats it is told support them."""

    def __init__(self, *outcomes: object, private: bool = True, drafts: list[object] | None = None) -> None:
        super().__init__(*outcomes)
        self.private = private
        self.draft_outcomes = list(drafts or [])
        self.drafts: list[tuple[int, str, TextFormat]] = []
        self.asked: list[ReplyTarget] = []

    def supports_drafts(self, target: ReplyTarget) -> bool:
        self.asked.append(target)
        return self.private

    async def send_draft(
        self, target: ReplyTarget, draft_id: int, text: str, *, markup: TextFormat = TextFormat.PLAIN
    ) -> None:
        self.drafts.append((draft_id, text, markup))
        self.targets.append(target)
        if self.draft_outcomes and isinstance(err := self.draft_outcomes.pop(0), Exception):
            raise err


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


# -- notices -------------------------------------------------------------------------------------
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


class DraftingHtml(Drafting):
    capabilities = Capabilities(edit_interval=1.0, formatting=TextFormat.TELEGRAM_HTML)


async def test_a_draft_is_rendered_as_a_preview_with_its_dangling_markup_closed():
    adapter = DraftingHtml()
    d = watched(adapter, MemoryLedger())
    assert await d.deliver(Send(0, "**bo ▉", False), "**bo ▉") == Delivered()
    [(_, text, markup)] = adapter.drafts
    assert (text, markup) == ("<b>bo</b> ▉", TextFormat.TELEGRAM_HTML)


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
