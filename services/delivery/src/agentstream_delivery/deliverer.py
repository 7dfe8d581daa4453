"""Carry one operation of a stream out on the platform: ledger, flood control, error classes.

Per call: write the intent (`pending`), wait for the chat's slot (`ChatGate`), write
`sending` immediately before the request leaves, call the adapter, write the outcome.
How each error class is handled:

- rate limited → the row goes back to what it was (the call did not land); the chat's
  gate moves past `retry_after` and the op is retried then (a preview only until the
  stream degrades). At the strike limit the chat is `DEGRADED` and the op's outcome is
  `Degraded`, which the stream actor feeds to its state machine.
- transient → retried with a short backoff, a bounded number of times.
- not found (the message was deleted) → the text is posted as a new message.
- timed out (`OutcomeUnknown`) on an edit → `unknown`, repeated at once (edits are
  idempotent), and the message's final text is re-applied once the platform's
  late-landing window has passed (`settle`): the timed-out request may still land
  after the final and must not leave a stale preview.
- timed out on a send → `unknown` without a message id: it may have posted an orphan
  we cannot address. The segment's next text (a final at once) goes out as a new
  message, so the segment is never missing. Every send carries the message's key
  (`SEND_KEY`: a platform with idempotent creates answers the repeat with the first
  message), and on a platform with an `OrphanProbe` (Telegram) the orphan is searched
  for and deleted once the late-landing window has passed (`orphans`, in `settle`).
- formatting rejected (Telegram "can't parse entities") → the same call at once as plain
  text (`formatting.plain`): the frame is shown without its markup, never lost.
- too long, bad format → `failed`; forbidden → `failed`, the chat is `DEAD` and no call
  of the stream leaves any more.

The ledger rows loaded at start (`recover`) make a replay after a crash idempotent:
a message that exists is edited, one that shows the text already is left alone, a final
one is never turned back into a preview. A `pending` row never left and is carried out;
a `sending` row may have reached the platform and becomes `unknown`.

Notices (command replies, flood warnings, pairing codes, errors) are one platform message
of their own, through the same ledger (`deliver_notice`): their rows are keyed by the
notice record's id (stable across a replay), segment 0, so a restarted delivery sends a
notice that never left and leaves one that landed: exactly once, like a stream's messages.
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from enum import Enum
from typing import Any, TypeVar

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import LedgerState, Notice, ReplyTarget
from agentstream_delivery.adapters.base import (
    DELIVERING_RUN,
    SEND_KEY,
    AdapterError,
    DraftAdapter,
    Forbidden,
    FormattingRejected,
    NotFound,
    OrphanProbe,
    OutcomeUnknown,
    PlatformAdapter,
    RateLimited,
    Transient,
)
from agentstream_delivery.delivery_metrics import CallOp, CallOutcome, DeliveryMetrics
from agentstream_delivery.formatting import plain, render_frame
from agentstream_delivery.ledger import Ledger, LedgerEntry, LedgerScope, sha256
from agentstream_delivery.orphans import Orphan, numeric, search
from agentstream_delivery.platform_ops import Op, Send
from agentstream_delivery.ratelimit import ChatGate
from agentstream_delivery.render import CURSOR

MAX_CALLS_PER_OP = 12
TRANSIENT_BACKOFF_S = 0.3
DEFAULT_LATE_LANDING_S = 15.0  # the HTTP adapters' default timeout (10 s) + a margin
REAPPLY_ROUNDS = 3  # re-applications of one message whose re-application itself timed out

WallClock = Callable[[], float]
T = TypeVar("T")

PENDING, SENDING, SENT, UNKNOWN, FAILED = (
    LedgerState.PENDING,
    LedgerState.SENDING,
    LedgerState.SENT,
    LedgerState.UNKNOWN,
    LedgerState.FAILED,
)


class ChatStatus(Enum):
    """How the stream's chat is delivered to; it only ever moves down this list."""

    DRAFTING = "drafting"  # previews stream as a draft (Telegram private chats)
    EDITING = "editing"  # previews are a message edited in place
    DEGRADED = "degraded"  # the rate-limit strike limit was reached: final texts only
    DEAD = "dead"  # forbidden: nothing more can be posted to this chat


@dataclass(frozen=True)
class Delivered:
    """The platform shows the op's text."""


@dataclass(frozen=True)
class Skipped:
    """No call was needed: the platform shows the text already, or the chat takes no previews now."""


@dataclass(frozen=True)
class Failed:
    """The op did not land (recorded in the ledger); the stream's next op may."""


@dataclass(frozen=True)
class Degraded:
    """The chat became `DEGRADED` during this op: the stream must stop previewing.

    `shown` is what the platform shows of each message that landed (segment → text
    length, cursor excluded), so the state machine knows what of its open message is missing.
    """

    shown: Mapping[int, int]


@dataclass(frozen=True)
class Dead:
    """The chat is `DEAD` (forbidden): this op and every later one is dropped."""


Outcome = Delivered | Skipped | Failed | Degraded | Dead


@dataclass(frozen=True)
class Again:
    """An attempt of `_call` that did not land: try again with `entry` (after `backoff_s`)."""

    entry: LedgerEntry
    resent: bool = False  # the final already went out again as a new message once
    backoff_s: float = 0.0


async def uncut(coro: Coroutine[Any, Any, T]) -> T:
    """Runs `coro` to its end even when the caller is cancelled, then passes the cancellation on:
    a platform request that left is waited for and its outcome recorded (docs/delivery.md § Rebalance)."""
    inner = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(inner)
    except asyncio.CancelledError:
        await asyncio.wait({inner})
        raise


@dataclass(eq=False)
class Deliverer:
    scope: LedgerScope
    target: ReplyTarget
    adapter: PlatformAdapter
    gate: ChatGate
    ledger: Ledger
    log: structlog.stdlib.BoundLogger
    observe: DeliveryMetrics | None = None
    _: KW_ONLY
    late_landing_s: float = DEFAULT_LATE_LANDING_S
    wall: WallClock = time.time  # epoch seconds: `reapply_at` outlives the process
    entries: dict[int, LedgerEntry] = field(init=False, default_factory=dict)
    # segment → the newest text the platform is known to show (or should)
    texts: dict[int, str] = field(init=False, default_factory=dict)
    # segment → the text as the platform last accepted it (rendered, or its plain fallback)
    accepted: dict[int, str] = field(init=False, default_factory=dict)
    status: ChatStatus = field(init=False)
    orphans: list[Orphan] = field(init=False, default_factory=list)  # sends of unknown outcome, to find
    _reposts: dict[int, int] = field(init=False, default_factory=dict)  # segment → new messages after a deletion
    _sent_as: tuple[str, TextFormat] | None = field(init=False, default=None)  # the current send's body
    _call_started: float = field(init=False, default=0.0)  # when the current platform call left (monotonic)

    def __post_init__(self) -> None:
        drafts = isinstance(self.adapter, DraftAdapter) and self.adapter.supports_drafts(self.target)
        self.status = ChatStatus.DRAFTING if drafts else ChatStatus.EDITING

    async def recover(self) -> None:
        """Load the stream's ledger rows; a call cut off by a crash (`sending`) becomes `unknown`.

        `pending` rows stay: their call never left, the replay carries it out.
        """
        self.entries = await self.ledger.load(self.scope)
        self.orphans = await self.ledger.orphans(self.scope)  # searched for in `settle`, as before the crash
        for entry in list(self.entries.values()):
            if entry.state != SENDING:
                continue
            reapply_at = entry.reapply_at
            if entry.message_id is not None:  # an edit in flight may still land: re-apply the final after it
                reapply_at = max(reapply_at or 0.0, self.wall() + self.late_landing_s)
            await self._record(
                replace(entry, state=UNKNOWN, reapply_at=reapply_at, error="delivery restarted during the call")
            )
        if self.entries:
            self.log.info("stream resumed from ledger", messages=len(self.entries))

    def shown(self) -> dict[int, int]:
        """How much text (cursor excluded) the platform shows in each message that landed."""
        return {
            segment: entry.text_length - (0 if entry.final else len(CURSOR))
            for segment, entry in self.entries.items()
            if entry.message_id is not None
        }

    def message_id(self, segment: int) -> str | None:
        entry = self.entries.get(segment)
        return None if entry is None else entry.message_id

    async def deliver(self, op: Op, text: str) -> Outcome:
        before = self.status
        run = DELIVERING_RUN.set(self.scope.root_run_id)
        try:
            outcome = await self._deliver(op, text)
        finally:
            DELIVERING_RUN.reset(run)
        if self.status is ChatStatus.DEGRADED and before is not ChatStatus.DEGRADED:
            return Degraded(self.shown())
        return outcome

    async def _deliver(self, op: Op, text: str) -> Outcome:
        entry = self.entries.get(op.segment)
        if self.status is ChatStatus.DEAD:
            return Dead()
        if self.status is ChatStatus.DEGRADED and not op.final:
            return Skipped()
        if entry is not None:
            if entry.landed(text):  # a replay after restart: the platform already shows this
                self.texts[op.segment] = text
                return Skipped()
            if entry.final and not op.final and entry.state in (SENT, UNKNOWN):
                return Skipped()  # a replayed preview of a message already finalized (or being so)
            if self._shows_already(op, text, entry):
                # Its markup is what the message shows (a preview whose cursor the final's markup swallows
                # too): an edit would be refused as "not modified". The ledger still learns it is final.
                await self._record(entry.with_text(SENT, text, op.final))
                self.texts[op.segment] = text
                return Delivered()
        drafting = self.status is ChatStatus.DRAFTING
        if (entry is None or entry.message_id is None) and not op.final and op.role == "text" and drafting:
            outcome = await self._draft(op, text)
            if outcome is not None:
                return outcome
        if entry is None:
            entry = LedgerEntry(op.segment, PENDING)
            await self._record(entry)
        outcome = await self._call(op.segment, text, op.final, entry)
        if isinstance(outcome, Delivered):
            self.texts[op.segment] = text
        return outcome

    def _shows_already(self, op: Op, text: str, entry: LedgerEntry) -> bool:
        if entry.state != SENT or entry.message_id is None or op.segment not in self.accepted:
            return False
        return render_frame(text, self.adapter.capabilities.formatting, final=op.final) == self.accepted[op.segment]

    async def settle(self) -> None:
        """Re-apply each message's final text once the late-landing window of its unknown calls has passed.

        A request that timed out may still be applied by the platform, after the final
        text: the chat would end on a stale preview. The window (`late_landing_s`)
        bounds how late it can land, so one re-application after it is the last word.
        """
        run = DELIVERING_RUN.set(self.scope.root_run_id)
        try:
            await self._settle()
        finally:
            DELIVERING_RUN.reset(run)

    async def _settle(self) -> None:
        await self._reapply()
        while self.orphans:
            orphan = self.orphans.pop(0)
            if self.status is not ChatStatus.DEAD:  # a dead chat is not searched: nothing can be deleted there
                await self._remove_orphan(orphan)
            await self.ledger.drop_orphan(self.scope, orphan)

    async def _remove_orphan(self, orphan: Orphan) -> None:
        if not isinstance(self.adapter, OrphanProbe):
            return
        if (delay := orphan.lands_by - self.wall()) > 0:
            await asyncio.sleep(delay)
        own = [i for e in self.entries.values() if (i := numeric(e.message_id)) is not None]
        known_ids = functools.partial(self.ledger.known_ids, self.scope.platform)
        await search(orphan, own, known_ids, self.target, self.adapter, self.gate, self.log)

    async def _reapply(self) -> None:
        for _ in range(REAPPLY_ROUNDS * max(1, len(self.entries))):
            due = [
                (e.reapply_at, seg)
                for seg, e in self.entries.items()
                if e.reapply_at is not None and e.message_id is not None
            ]
            if not due or self.status is ChatStatus.DEAD:
                return
            at, seg = min(due)
            if (delay := at - self.wall()) > 0:
                await asyncio.sleep(delay)
            entry = replace(self.entries[seg], reapply_at=None)
            text = self.texts.get(seg)
            if text is None:  # the text never reached this process: nothing to re-apply it with
                self.log.warning("late-landing window passed, text unknown; not re-applied", segment=seg)
                await self._record(entry)
                continue
            self.log.info("re-applying the text after a call of unknown outcome", segment=seg)
            await self._call(seg, text, entry.final, entry)

    async def _draft(self, op: Op, text: str) -> Outcome | None:
        """A preview as a Telegram draft; None when drafts just failed (the caller falls back to messages)."""
        assert isinstance(self.adapter, DraftAdapter)
        draft_id = zlib.crc32(f"{self.scope.root_run_id}:{op.segment}".encode()) or 1
        await self.gate.acquire()
        try:
            fmt = self.adapter.capabilities.formatting
            body = render_frame(text, fmt, final=False)
            await uncut(self.adapter.send_draft(self.target, draft_id, body, markup=fmt))  # as `_call`'s attempts
        except RateLimited as err:
            self._observe(CallOp.DRAFT, CallOutcome.RATE_LIMITED)
            self._strike(err)
            return Skipped()  # a draft frame is superseded by the next one anyway
        except AdapterError as err:
            self._observe(CallOp.DRAFT, CallOutcome.ERROR)
            self.status = ChatStatus.EDITING  # first failure: edits for the rest of the run
            self.log.info("draft streaming failed; falling back to edits", error=repr(err))
            return None
        self.gate.succeeded()
        self._observe(CallOp.DRAFT, CallOutcome.OK)
        return Delivered()

    async def _call(self, segment: int, text: str, final: bool, entry: LedgerEntry) -> Outcome:
        resent = False
        for _ in range(MAX_CALLS_PER_OP):
            await self.gate.acquire()
            # From its `sending` row to its outcome's row an attempt is never cut short: a hand-over
            # (docs/delivery.md § Rebalance) waits for it, so the ledger tells the next owner what the chat shows.
            result = await uncut(self._attempt(segment, text, final, entry, resent))
            if not isinstance(result, Again):
                return result
            entry, resent = result.entry, result.resent
            if result.backoff_s > 0:
                await asyncio.sleep(result.backoff_s)
        return await self._fail(entry, AdapterError("too many attempts"))

    async def _attempt(self, segment: int, text: str, final: bool, entry: LedgerEntry, resent: bool) -> Outcome | Again:
        """One request of `_call`, from its `sending` row to the row of its outcome."""
        message_id = entry.message_id
        kind = CallOp.EDIT if message_id is not None else CallOp.SEND
        left_at = self.wall()
        await self._record(entry.with_text(SENDING, text, final))  # from here on it may reach the platform
        self._call_started = time.monotonic()
        try:
            message_id, accepted = await self._put(kind, segment, message_id, text, final)
        except RateLimited as err:
            self._observe(kind, CallOutcome.RATE_LIMITED)
            await self._record(entry)  # refused: nothing left, the row is what it was
            self._strike(err)
            if self.status is ChatStatus.DEGRADED and not final:
                return Skipped()  # final-only from now on: previews are dropped
            return Again(entry, resent)
        except NotFound as err:
            self._observe(kind, CallOutcome.NOT_FOUND)
            if message_id is None:
                return await self._fail(entry, err)
            entry = LedgerEntry(segment, PENDING)  # deleted on the platform: post it again
            self._reposts[segment] = self._reposts.get(segment, 0) + 1  # a new message: a new key
            await self._record(entry)
            return Again(entry, resent)
        except (Transient, ConnectionError) as err:  # the request did not land: try again
            self._observe(kind, CallOutcome.TRANSIENT)
            self.log.info("transient platform error", op=kind, error=repr(err))
            await self._record(entry)
            return Again(entry, resent, TRANSIENT_BACKOFF_S)
        except OutcomeUnknown as err:
            self._observe(kind, CallOutcome.UNKNOWN)
            self.log.info("platform call of unknown outcome", op=kind, segment=segment, error=repr(err))
            if message_id is not None:  # it may land late: repeat it now, re-apply after the window
                entry = replace(
                    entry.with_text(UNKNOWN, text, final),
                    error=str(err),
                    reapply_at=self.wall() + self.late_landing_s,
                )
                await self._record(entry)
                return Again(entry, resent)
            await self._note_orphan(segment)
            entry = LedgerEntry(segment, UNKNOWN, None, len(text), sha256(text), final, str(err))
            await self._record(entry)
            if final and not resent:  # the segment still gets its final, as a new message
                return Again(entry, resent=True)
            return Failed()  # a preview: the segment's next text goes out as a new message
        except AdapterError as err:
            self._observe(kind, err.kind)
            failed = await self._fail(entry, err)
            if isinstance(err, Forbidden):
                self.status = ChatStatus.DEAD
                return Dead()
            return failed
        except Exception as err:  # an adapter bug must not end the stream: this op fails, the next may land
            self._observe(kind, CallOutcome.ERROR)
            return await self._fail(entry, AdapterError(repr(err)))
        self.gate.succeeded()
        self._observe(kind, CallOutcome.OK)
        self.accepted[segment] = accepted
        done = entry.with_text(SENT, text, final, message_id)
        if done.reapply_at is not None and done.reapply_at <= left_at:
            done = replace(done, reapply_at=None)  # whatever could land late had landed before this call
        await self._record(done)
        return Delivered()

    async def _put(self, kind: CallOp, segment: int, message_id: str | None, text: str, final: bool) -> tuple[str, str]:
        """One send or edit of `text` rendered in the platform's markup; as plain text if the markup is refused.

        Returns the message id and the text as the platform took it."""
        fmt = self.adapter.capabilities.formatting
        rendered = render_frame(text, fmt, final=final)
        key = SEND_KEY.set(f"{self.scope.root_run_id}:{segment}:{self._reposts.get(segment, 0)}")
        try:
            return await self._put_as(message_id, rendered, final, fmt), rendered
        except FormattingRejected as err:
            if fmt is TextFormat.PLAIN:
                raise
            self._observe(kind, err.kind)
            self.log.warning("platform refused the markup; sending the frame as plain text", op=kind, error=str(err))
            await self.gate.acquire()
            as_plain = plain(text)
            return await self._put_as(message_id, as_plain, final, TextFormat.PLAIN), as_plain
        finally:
            SEND_KEY.reset(key)

    async def _put_as(self, message_id: str | None, text: str, final: bool, markup: TextFormat) -> str:
        if message_id is None:
            self._sent_as = (text, markup)
            return await self.adapter.send(self.target, text, final=final, markup=markup)
        await self.adapter.edit(self.target, message_id, text, final=final, markup=markup)
        return message_id

    async def _note_orphan(self, segment: int) -> None:
        """A send timed out: remember what it sent (in the ledger: a restart searches for it too), to
        find its message after the window (`settle`)."""
        if not isinstance(self.adapter, OrphanProbe) or self._sent_as is None:
            return
        own = [i for e in self.entries.values() if (i := numeric(e.message_id)) is not None]
        text, markup = self._sent_as
        lands_by = self.wall() + self.late_landing_s
        orphan = Orphan(segment, text, markup, max(own, default=None), lands_by)
        await self.ledger.keep_orphan(self.scope, orphan)
        self.orphans.append(orphan)

    def _strike(self, err: RateLimited) -> None:
        """A 429: the gate schedules the chat's next call; at the strike limit the stream degrades."""
        strikes = self.gate.rate_limited(err.retry_after)
        self.log.info("rate limited", retry_after=err.retry_after, strikes=strikes)
        if self.gate.exhausted and self.status in (ChatStatus.DRAFTING, ChatStatus.EDITING):
            self.status = ChatStatus.DEGRADED
            if self.observe is not None:
                self.observe.stream_degraded(self.scope.platform)
            self.log.warning("stream degraded to final text only", strikes=strikes)

    async def _fail(self, entry: LedgerEntry, err: AdapterError) -> Outcome:
        self.log.warning("platform call failed", segment=entry.segment, kind=err.kind, error=repr(err))
        await self._record(replace(entry, state=FAILED, error=f"{err.kind}: {err}"))
        return Failed()

    async def _record(self, entry: LedgerEntry) -> None:
        self.entries[entry.segment] = entry
        await self.ledger.record(self.scope, entry)
        if self.observe is not None:
            self.observe.ledger_write(entry.state)

    def _observe(self, kind: CallOp, outcome: CallOutcome) -> None:
        """A call's outcome; send and edit calls with their latency (since `_call_started`)."""
        if self.observe is not None:
            seconds = time.monotonic() - self._call_started if kind in (CallOp.SEND, CallOp.EDIT) else None
            self.observe.call(self.scope.platform, kind, outcome, seconds)


async def deliver_notice(
    notice: Notice,
    target: ReplyTarget,
    text: str,
    adapter: PlatformAdapter,
    gate: ChatGate,
    ledger: Ledger,
    log: structlog.stdlib.BoundLogger,
    observe: DeliveryMetrics | None = None,
    *,
    late_landing_s: float,
) -> Outcome:
    """A notice as one platform message of its own, exactly once (see the module's docstring)."""
    scope = LedgerScope(target.platform, target.chat_id, notice.id, notice.conversation_key)
    log = log.bind(notice_id=notice.id, platform=target.platform, chat_id=target.chat_id)
    deliverer = Deliverer(scope, target, adapter, gate, ledger, log, observe, late_landing_s=late_landing_s)
    await deliverer.recover()
    outcome = await deliverer.deliver(Send(0, text, final=True, role="notice"), text)
    if isinstance(outcome, Failed | Dead):
        log.warning("notice not delivered")
    await deliverer.settle()
    return outcome
