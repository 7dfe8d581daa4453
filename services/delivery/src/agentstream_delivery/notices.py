"""Notices (`notice` events: command replies, flood warnings, pairing codes, errors) through the ledger.

A notice is one platform message of its own: its ledger row is keyed by the notice
record's id (stable across a replay), segment 0. It waits for the chat's slot like any
other call and is written `pending → sending → sent`, so a delivery restarted before
the `events` offset moved past it sends it if it never left and leaves it if it landed:
exactly once, like a stream's messages.
"""

from __future__ import annotations

import structlog

from agentstream.contracts import Notice, ReplyTarget
from agentstream_delivery.adapters import PlatformAdapter
from agentstream_delivery.delivering import CallObserver, Deliverer, Outcome
from agentstream_delivery.inputs import Send
from agentstream_delivery.ledger import Ledger, LedgerScope
from agentstream_delivery.ratelimit import ChatGate


async def deliver_notice(
    notice: Notice,
    target: ReplyTarget,
    text: str,
    adapter: PlatformAdapter,
    gate: ChatGate,
    ledger: Ledger,
    log: structlog.stdlib.BoundLogger,
    observe: CallObserver | None = None,
    *,
    late_landing_s: float,
) -> Outcome:
    scope = LedgerScope(target.platform, target.chat_id, notice.id, notice.conversation_key)
    log = log.bind(notice_id=notice.id, platform=target.platform, chat_id=target.chat_id)
    deliverer = Deliverer(scope, target, adapter, gate, ledger, log, observe, late_landing_s=late_landing_s)
    await deliverer.recover()
    outcome = await deliverer.deliver(Send(0, text, final=True, role="notice"), text)
    if outcome is Outcome.FAILED:
        log.warning("notice not delivered")
    await deliverer.settle()
    return outcome
