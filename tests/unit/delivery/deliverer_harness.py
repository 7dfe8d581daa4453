"""What the deliverer's tests share: scripted adapters (each call answered by the next scripted
outcome), the deliverer built around one, the ledger's receipts, hand-moved clocks and metric reads."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import structlog
from prometheus_client import CollectorRegistry

from agentstream.config import TextFormat
from agentstream.contracts import DeliveryReceipt, LedgerState, ReplyTarget
from agentstream_delivery.adapters.base import DELIVERING_RUN, Capabilities
from agentstream_delivery.deliverer import Deliverer
from agentstream_delivery.delivery_metrics import DeliveryMetrics
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, MemoryLedger
from agentstream_delivery.ratelimit import ChatGate

TARGET = ReplyTarget(platform="scripted", chat_id="c")
SCOPE = LedgerScope("scripted", "c", "r", "k")


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


class DraftingHtml(Drafting):
    capabilities = Capabilities(edit_interval=1.0, formatting=TextFormat.TELEGRAM_HTML)
