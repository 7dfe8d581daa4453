"""In-memory state of unfinished runs: one buffer per root run id, filled from `events`.

Child runs (delegation) share their root's buffer. A buffer lives until its root's
`run.finished` has been flushed. Each buffer remembers where its first event sits in
the topic (`origin`): the offset-commit seam — a partition may only be committed up
to the oldest unflushed buffer's first event (`oldest_origin`), so a restart re-reads
what was only in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from agentstream.contracts import (
    MessageCompleted,
    RunEvent,
    RunFinished,
    RunQueued,
    RunStarted,
    ToolCall,
    ToolResult,
)

BufferedEvent = RunQueued | RunStarted | MessageCompleted | ToolCall | ToolResult | RunFinished
BUFFERED_TYPES = (RunQueued, RunStarted, MessageCompleted, ToolCall, ToolResult, RunFinished)


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
    finished: RunFinished | None = None
    last_event_at: datetime | None = None  # for the stale-run watchdog (later)
    seen: set[int] = field(default_factory=set)  # seqs already applied: a re-read event is a no-op

    def add(self, event: RunEvent) -> None:
        self.last_event_at = event.ts
        if event.seq in self.seen or not isinstance(event, BUFFERED_TYPES):
            return
        self.seen.add(event.seq)
        match event:
            case RunQueued():
                self.queued = event
            case RunStarted():
                self.started = event
            case MessageCompleted():
                self.assistant.append(event)
            case ToolCall():
                self.tools.append(ToolExchange(event))
            case ToolResult():
                self._attach(event)
            case RunFinished():
                self.finished = event

    def _attach(self, result: ToolResult) -> None:
        # The latest call with that id still waiting (a retried call reuses its id).
        for exchange in reversed(self.tools):
            if exchange.call.call_id == result.call_id and exchange.result is None:
                exchange.result = result
                return


class BufferSet:
    """The open buffers, by root run id."""

    def __init__(self) -> None:
        self._buffers: dict[str, RunBuffer] = {}

    def add(self, event: RunEvent, origin: Origin | None = None) -> RunBuffer | None:
        """Applies the event; returns its buffer (None for events that open nothing)."""
        buf = self._buffers.get(event.root_run_id)
        if buf is None:
            if not isinstance(event, BUFFERED_TYPES):
                return None  # deltas, notices, heartbeats of unknown runs carry nothing to store
            buf = RunBuffer(event.root_run_id, event.conversation_key, origin)
            self._buffers[event.root_run_id] = buf
        buf.add(event)
        return buf

    def get(self, root_run_id: str) -> RunBuffer | None:
        return self._buffers.get(root_run_id)

    def discard(self, root_run_id: str) -> None:
        """The run is in the database: forget it (and let the commit point move past it)."""
        self._buffers.pop(root_run_id, None)

    def oldest_origin(self, partition: int) -> int | None:
        """Lowest first-event offset of the unflushed runs read from `partition`."""
        offsets = [b.origin.offset for b in self._buffers.values()
                   if b.origin is not None and b.origin.partition == partition]
        return min(offsets, default=None)

    def __len__(self) -> int:
        return len(self._buffers)
