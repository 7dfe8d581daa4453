"""In-memory state of unfinished runs: one buffer per root run id, filled from `events`.

Child runs (delegation) share their root's buffer. A buffer lives until its root's
`run.finished` has been flushed. Each buffer remembers where its first event sits in
the topic (`origin`): the offset-commit seam — a partition may only be committed up
to the oldest unflushed buffer's first event (`oldest_origin`), so a restart re-reads
what was only in memory.

A run done with (stored, dead-lettered, refused) is remembered with its origin for a
while: a `run.queued` of it read *after* that origin is ingress repeating the run after a
crash (the same derived run id, docs/decisions.md), and opens nothing.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import assert_never

from agentstream.contracts import DeltaKind
from agentstream.contracts import events as ev
from agentstream.contracts.events import (
    MessageCompleted,
    MessageDelta,
    RunEvent,
    RunFinished,
    RunQueued,
    RunStarted,
    StepCompleted,
    ToolCall,
    ToolResult,
)

BufferedEvent = RunQueued | RunStarted | MessageCompleted | ToolCall | ToolResult | StepCompleted | RunFinished
BUFFERED_TYPES = (RunQueued, RunStarted, MessageCompleted, ToolCall, ToolResult, StepCompleted, RunFinished)
DONE_KEPT = 10_000  # runs done with whose repeated run.queued is recognised (~1 MB)


class BufferState(StrEnum):
    OPEN = "open"  # events arrive; the run has not finished
    LOST = "lost"  # the watchdog published a run.finished for it and waits to read it back
    FINISHED = "finished"  # its run.finished was read: ready to flush


@dataclass(frozen=True)
class Origin:
    """Where an event was read: partition and offset of the `events` topic."""

    partition: int
    offset: int


@dataclass
class ToolExchange:
    """One tool call and, once it arrived, its result."""

    call: ToolCall
    result: ToolResult | None = None


@dataclass
class RunBuffer:
    root_run_id: str
    conversation_key: str
    origin: Origin | None = None
    queued: RunQueued | None = None
    started: RunStarted | None = None
    assistant: list[MessageCompleted] = field(default_factory=list)
    tools: list[ToolExchange] = field(default_factory=list)
    steps: list[StepCompleted] = field(default_factory=list)
    # Text streamed by messages that never completed (interrupt, lost runner): kept, not dropped.
    partial: dict[str, list[MessageDelta]] = field(default_factory=dict)
    finished: RunFinished | None = None
    # The rest of what the chat showed, archived with the run for a replay (`rows.event_rows`).
    shown: list[ev.MessageStarted | ev.SegmentBreak | ev.Notice] = field(default_factory=list)
    state: BufferState = BufferState.OPEN
    # A notice before any run.started: the runner refused the run (no identity) and
    # will send nothing more. Not a lost run: the watchdog forgets it, nothing is stored.
    refused: bool = False
    last_event_at: datetime | None = None
    # Local arrival time, not the event's ts: after a restart a re-read run gets a fresh
    # `stale_after` window, in which the rest of its stream (maybe its end) is re-read too.
    last_seen_at: float = field(default_factory=time.monotonic)
    max_seq: int = -1
    seen: set[int] = field(default_factory=set)  # seqs already applied: a re-read event is a no-op

    def add(self, event: RunEvent, now: float | None = None) -> None:
        self.last_event_at = event.ts
        self.last_seen_at = time.monotonic() if now is None else now
        self.max_seq = max(self.max_seq, event.seq)
        if event.seq in self.seen:
            return
        match event:
            case ev.Notice():
                # Before any run.started: the runner refused the run. After: shown, not stored.
                if self.started is None:
                    self.refused = True
                    return
                self._show(event)
                return
            case ev.MessageStarted() | ev.SegmentBreak():
                self._show(event)  # no rows of their own: kept for the run's archived stream
                return
            case ev.StepStarted() | ev.StepFailed() | ev.RunHeartbeat():
                return  # a stored run keeps none of it
            case ev.ToolHeartbeat():
                return  # a sign of life only (above): a slow tool call is not a lost run
            case MessageDelta():
                self.partial.setdefault(event.message_id, []).append(event)
            case RunQueued():
                self.queued = event
            case RunStarted():
                self.started = event
            case MessageCompleted():
                self.assistant.append(event)
                self.partial.pop(event.message_id, None)  # its full text is in the event
            case ToolCall():
                self.tools.append(ToolExchange(event))
            case ToolResult():
                self._attach(event)
            case StepCompleted():
                self.steps.append(event)
            case RunFinished():
                self.finished = event
                self.state = BufferState.FINISHED
            case unexpected:
                assert_never(unexpected)
        self.seen.add(event.seq)

    def _show(self, event: ev.MessageStarted | ev.SegmentBreak | ev.Notice) -> None:
        # By record id, not seq: a notice need not own its seq (ingress's may repeat one).
        if all(e.id != event.id for e in self.shown):
            self.shown.append(event)

    @property
    def replay(self) -> bool:
        """A replay of another run (`agentstream replay`): delivered, never stored."""
        return self.started is not None and self.started.replay_of is not None

    def mark_lost(self) -> None:
        """OPEN → LOST: the watchdog published its ending; no second one until it is read back."""
        if self.state is BufferState.OPEN:
            self.state = BufferState.LOST

    def reopen(self) -> None:
        """LOST → OPEN: publishing the ending failed; the watchdog tries again later."""
        if self.state is BufferState.LOST:
            self.state = BufferState.OPEN

    def incomplete_messages(self) -> list[MessageDelta]:
        """One delta per message that streamed text but never completed, carrying all its text."""
        merged = []
        for deltas in self.partial.values():
            text = "".join(d.text for d in deltas if d.kind == DeltaKind.TEXT)
            if text:
                merged.append(deltas[0].model_copy(update={"text": text}))
        return merged

    def _attach(self, result: ToolResult) -> None:
        # The latest call with that id still waiting (a retried call reuses its id).
        for exchange in reversed(self.tools):
            if exchange.call.call_id == result.call_id and exchange.result is None:
                exchange.result = result
                return


class BufferSet:
    """The open buffers, by root run id."""

    def __init__(self, done_kept: int = DONE_KEPT) -> None:
        self._buffers: dict[str, RunBuffer] = {}
        self._done: OrderedDict[str, Origin | None] = OrderedDict()  # root run id → its buffer's origin
        self._done_kept = done_kept

    def add(self, event: RunEvent, origin: Origin | None = None, now: float | None = None) -> RunBuffer | None:
        """Applies the event; returns its buffer (None for events that open nothing)."""
        buf = self._buffers.get(event.root_run_id)
        if buf is None:
            if not isinstance(event, BUFFERED_TYPES):
                return None  # deltas, notices, heartbeats of unknown runs carry nothing to store
            if isinstance(event, RunQueued) and self.repeats(event.root_run_id, origin):
                return None
            buf = RunBuffer(event.root_run_id, event.conversation_key, origin)
            self._buffers[event.root_run_id] = buf
        buf.add(event, now)
        return buf

    def get(self, root_run_id: str) -> RunBuffer | None:
        return self._buffers.get(root_run_id)

    def stale(self, now: float, stale_after_s: float) -> list[RunBuffer]:
        """Open runs that have been silent for `stale_after_s`: lost with their runner.

        A run queued and not started waits behind its conversation's running run (which may wait for an
        approval for minutes) and says nothing meanwhile: it is as alive as the freshest run of its
        conversation, and lost only with it."""
        open_runs = [b for b in self._buffers.values() if b.state is BufferState.OPEN]
        freshest: dict[str, float] = {}
        for b in open_runs:
            freshest[b.conversation_key] = max(freshest.get(b.conversation_key, b.last_seen_at), b.last_seen_at)
        return [
            b
            for b in open_runs
            if now - (b.last_seen_at if b.started is not None else freshest[b.conversation_key]) >= stale_after_s
        ]

    def heard_again(self, now: float) -> None:
        """Kafka is heard again after an outage: no open run's silence during it was its runner's
        (its heartbeats could not be produced, or not read), so each gets a fresh `stale_after` window."""
        for b in self._buffers.values():
            if b.state is BufferState.OPEN:
                b.last_seen_at = max(b.last_seen_at, now)

    def discard(self, root_run_id: str) -> None:
        """Forget the run's buffer (and let the commit point move past it); its partition's
        new owner, or a restart, reads it again."""
        self._buffers.pop(root_run_id, None)

    def done(self, root_run_id: str) -> None:
        """The run is done with (in the database, dead-lettered, refused): forget its buffer,
        remember where it began, so a repeat of its `run.queued` is recognised."""
        buf = self._buffers.pop(root_run_id, None)
        self._done[root_run_id] = buf.origin if buf is not None else None
        self._done.move_to_end(root_run_id)
        while len(self._done) > self._done_kept:
            self._done.popitem(last=False)

    def repeats(self, root_run_id: str, origin: Origin | None) -> bool:
        """A `run.queued` at `origin` repeats a run done with. The same record read again
        (its partition moved back here, at or before the run's first event) is no repeat:
        what follows it is read again too, and flushed again, idempotently."""
        if root_run_id not in self._done:
            return False
        first = self._done[root_run_id]
        if first is None or origin is None or first.partition != origin.partition:
            return True
        return origin.offset > first.offset

    def from_partitions(self, partitions: set[int]) -> list[RunBuffer]:
        return [b for b in self._buffers.values() if b.origin is not None and b.origin.partition in partitions]

    def oldest_origin(self, partition: int) -> int | None:
        """Lowest first-event offset of the unflushed runs read from `partition`."""
        offsets = [
            b.origin.offset for b in self._buffers.values() if b.origin is not None and b.origin.partition == partition
        ]
        return min(offsets, default=None)

    def __len__(self) -> int:
        return len(self._buffers)
