"""Platform errors are classified per platform and handled per class by the deliverer."""

from __future__ import annotations

import pytest
import structlog

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import (
    AdapterError,
    BadFormat,
    Capabilities,
    Forbidden,
    FormattingRejected,
    NotFound,
    RateLimited,
    TooLong,
    Transient,
)
from agentstream_delivery.adapters.telegram import classify
from agentstream_delivery.deliverer import ChatStatus, Dead, Degraded, Delivered, Deliverer, Failed, Skipped
from agentstream_delivery.ledger import LedgerScope, MemoryLedger
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
