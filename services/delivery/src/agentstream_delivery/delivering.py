"""Carry one operation of a stream out on the platform: ledger, flood control, error classes.

Per call: wait for the chat's slot (`ChatGate`), write the intent (`sending`) to the
ledger, call the adapter, write the outcome. How each error class is handled:

- rate limited → the chat's gate moves past `retry_after`; the op is retried then (a
  preview only until the stream degrades). At the strike limit the stream degrades.
- transient → retried with a short backoff, a bounded number of times.
- not found (the message was deleted) → the text is posted as a new message.
- timed out (`OutcomeUnknown`) on a send → `unknown`: it may have landed; never resent.
- too long, bad format, forbidden → `failed`; forbidden also ends all calls of the stream.

The ledger rows loaded at start (`recover`) make a replay after a crash idempotent:
a message that exists is edited, one that shows the text already is left alone, a final
one is never turned back into a preview, and an `unknown` one is never posted again.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from enum import Enum

import structlog

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import (
    AdapterError,
    DraftAdapter,
    Forbidden,
    NotFound,
    OutcomeUnknown,
    PlatformAdapter,
    RateLimited,
    Transient,
)
from agentstream_delivery.inputs import Op
from agentstream_delivery.ledger import Ledger, LedgerEntry, LedgerScope
from agentstream_delivery.ratelimit import ChatGate
from agentstream_delivery.render import CURSOR

MAX_CALLS_PER_OP = 12
TRANSIENT_BACKOFF_S = 0.3

CallObserver = Callable[[str, str, str], None]  # (platform, op kind, outcome)


class Outcome(Enum):
    DONE = "done"
    SKIPPED = "skipped"
    FAILED = "failed"


class Deliverer:
    def __init__(
        self, scope: LedgerScope, target: ReplyTarget, adapter: PlatformAdapter, gate: ChatGate, ledger: Ledger,
        log: structlog.stdlib.BoundLogger, observe: CallObserver | None = None,
    ) -> None:
        self.scope = scope
        self.target = target
        self.adapter = adapter
        self.gate = gate
        self.ledger = ledger
        self.log = log
        self.observe = observe
        self.entries: dict[int, LedgerEntry] = {}
        self.drafts = isinstance(adapter, DraftAdapter) and adapter.supports_drafts(target)
        self.degraded = False
        self.dead = False  # forbidden: nothing more can be posted to this chat

    async def recover(self) -> None:
        """Load the stream's ledger rows; a send cut off by a crash is `unknown`, never resent."""
        self.entries = await self.ledger.load(self.scope)
        for seg, entry in list(self.entries.items()):
            if entry.message_id is None and entry.state in ("pending", "sending"):
                await self._record(LedgerEntry(seg, "unknown", error="delivery restarted during the send"))
        if self.entries:
            self.log.info("stream resumed from ledger", messages=len(self.entries))

    def shown(self, segment: int) -> int | None:
        """How much text (cursor excluded) the platform shows in that message; None if it has none."""
        entry = self.entries.get(segment)
        if entry is None or entry.message_id is None:
            return None
        return entry.text_length - (0 if entry.final else len(CURSOR))

    def message_id(self, segment: int) -> str | None:
        entry = self.entries.get(segment)
        return None if entry is None else entry.message_id

    async def deliver(self, op: Op, text: str) -> Outcome:
        entry = self.entries.get(op.segment)
        if self.dead or (self.degraded and not op.final):
            return Outcome.SKIPPED
        if entry is not None:
            if entry.state == "unknown":
                self.log.info("message of unknown outcome not resent", segment=op.segment)
                return Outcome.SKIPPED
            if entry.landed(text) or (entry.final and not op.final and entry.state == "sent"):
                return Outcome.SKIPPED  # a replay after restart: the platform already shows this (or more)
        if (entry is None or entry.message_id is None) and not op.final and op.role == "text" and self.drafts:
            outcome = await self._draft(op, text)
            if outcome is not None:
                return outcome
        if entry is None:
            entry = LedgerEntry(op.segment, "pending")
            await self._record(entry)
        return await self._call(op, text, entry)

    async def _draft(self, op: Op, text: str) -> Outcome | None:
        """A preview as a Telegram draft; None when drafts just failed (the caller falls back to messages)."""
        assert isinstance(self.adapter, DraftAdapter)
        draft_id = zlib.crc32(f"{self.scope.root_run_id}:{op.segment}".encode()) or 1
        await self.gate.acquire()
        try:
            await self.adapter.send_draft(self.target, draft_id, text)
        except RateLimited as err:
            self._observe("draft", "rate_limited")
            self._strike(err)
            return Outcome.SKIPPED  # a draft frame is superseded by the next one anyway
        except AdapterError as err:
            self._observe("draft", "error")
            self.drafts = False  # first failure: edits for the rest of the run
            self.log.info("draft streaming failed; falling back to edits", error=repr(err))
            return None
        self.gate.succeeded()
        self._observe("draft", "ok")
        return Outcome.DONE

    async def _call(self, op: Op, text: str, entry: LedgerEntry) -> Outcome:
        for _ in range(MAX_CALLS_PER_OP):
            message_id = entry.message_id
            kind = "edit" if message_id is not None else "send"
            await self.gate.acquire()
            await self._record(entry.with_text("sending", text, op.final))
            try:
                if message_id is not None:
                    await self.adapter.edit(self.target, message_id, text, final=op.final)
                else:
                    message_id = await self.adapter.send(self.target, text, final=op.final)
            except RateLimited as err:
                self._observe(kind, "rate_limited")
                await self._record(entry)
                self._strike(err)
                if self.degraded and not op.final:
                    return Outcome.SKIPPED  # final-only from now on: previews are dropped
                continue
            except NotFound as err:
                self._observe(kind, "not_found")
                if message_id is None:
                    return await self._fail(entry, err)
                entry = LedgerEntry(op.segment, "pending")  # deleted on the platform: post it again
                continue
            except (Transient, ConnectionError) as err:  # the request did not land: try again
                self._observe(kind, "transient")
                self.log.info("transient platform error", op=kind, error=repr(err))
                await asyncio.sleep(TRANSIENT_BACKOFF_S)
                continue
            except OutcomeUnknown as err:
                self._observe(kind, "unknown")
                if kind == "edit":  # an edit is idempotent: repeating it is safe
                    continue
                await self._record(LedgerEntry(op.segment, "unknown", error=str(err)))
                return Outcome.FAILED
            except AdapterError as err:
                self._observe(kind, err.kind)
                if isinstance(err, Forbidden):
                    self.dead = True
                return await self._fail(entry, err)
            except Exception as err:  # an adapter bug must not end the stream: this op fails, the next may land
                self._observe(kind, "error")
                return await self._fail(entry, AdapterError(repr(err)))
            self.gate.succeeded()
            self._observe(kind, "ok")
            await self._record(entry.with_text("sent", text, op.final, message_id))
            return Outcome.DONE
        return await self._fail(entry, AdapterError("too many attempts"))

    def _strike(self, err: RateLimited) -> None:
        """A 429: the gate schedules the chat's next call; at the strike limit the stream degrades."""
        strikes = self.gate.rate_limited(err.retry_after)
        self.log.info("rate limited", retry_after=err.retry_after, strikes=strikes)
        if self.gate.exhausted and not self.degraded:
            self.degraded = True
            self.log.warning("stream degraded to final text only", strikes=strikes)

    async def _fail(self, entry: LedgerEntry, err: AdapterError) -> Outcome:
        self.log.warning("platform call failed", segment=entry.segment, kind=err.kind, error=repr(err))
        await self._record(LedgerEntry(entry.segment, "failed", entry.message_id, entry.text_length,
                                       entry.text_sha256, entry.final, error=f"{err.kind}: {err}"))
        return Outcome.FAILED

    async def _record(self, entry: LedgerEntry) -> None:
        self.entries[entry.segment] = entry
        await self.ledger.record(self.scope, entry)

    def _observe(self, kind: str, outcome: str) -> None:
        if self.observe is not None:
            self.observe(self.scope.platform, kind, outcome)
