"""Flood control: one call budget per (bot, chat), shared by every stream to that chat.

A stream waits on its chat's gate before each platform call; the wait is an
`asyncio.sleep` in that stream's own task, so a rate-limited chat never delays another
chat or the Kafka consumer. A 429 moves the chat's next slot to `now + retry_after`
(no call reaches the chat before) and doubles the spacing between calls; a run of
successes brings the spacing back to normal. Consecutive strikes are counted per chat:
the stream degrades to "final text only" at `DEGRADE_AFTER_STRIKES`.

The final text of a stream must not wait behind previews: a preview may only take a slot
`PREVIEW_RESERVE` of the spacing after the chat's next one (`free_at`), a final takes the
next slot itself. So previews leave part of the chat's budget unused, and a final that
comes while a preview waits for its slot takes the slot instead (`stream_actor.py`).

Gates are forgotten when idle (`GATE_IDLE_TTL_S`, at most `MAX_GATES` kept), never while
their chat's next slot is still ahead (a 429's `retry_after` holds) and never while a
stream or notice still holds the gate: those are found again through a weak reference,
so one chat never gets two gates.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from agentstream.bounded import BoundedMap

DEGRADE_AFTER_STRIKES = 3
RECOVER_AFTER_SUCCESSES = 5
MAX_BACKOFF_SCALE = 8.0
BACKOFF_BASE_S = 1.0  # spacing used after a strike on platforms that declare no per-chat interval
# Previews wait this share of the spacing beyond the chat's next slot: the budget kept in
# reserve for the final (on a 1 call/s chat, previews at most every 1.5 s).
PREVIEW_RESERVE = 0.5
MAX_GATES = 10_000
GATE_IDLE_TTL_S = 600.0

Clock = Callable[[], float]
GateKey = tuple[str, str, str]  # (platform, bot, chat)


@dataclass
class ChatGate:
    min_gap: float  # the platform's per-chat spacing between calls (0: none)
    clock: Clock = time.monotonic
    next_at: float = 0.0
    strikes: int = 0
    successes: int = 0
    scale: float = 1.0
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def gap(self) -> float:
        if self.scale == 1.0:
            return self.min_gap
        return max(self.min_gap, BACKOFF_BASE_S) * self.scale

    def free_at(self, *, final: bool) -> float:
        """When a call of this kind may leave: a final at the chat's next slot, a preview later by the reserve."""
        return self.next_at if final else self.next_at + PREVIEW_RESERVE * self.gap

    async def acquire(self) -> None:
        """Wait for this chat's next slot and take it (the lock keeps two streams from sharing one)."""
        async with self._lock:
            while (delay := self.next_at - self.clock()) > 0:  # noqa: ASYNC110 - a 429 may move next_at
                await asyncio.sleep(delay)
            self.next_at = self.clock() + self.gap

    def succeeded(self) -> None:
        # Spacing counts from the answer too: a call slowed down on its way must not let the
        # next one arrive at the platform less than `gap` after it.
        self.next_at = max(self.next_at, self.clock() + self.gap)
        self.strikes = 0
        self.successes += 1
        if self.successes >= RECOVER_AFTER_SUCCESSES:
            self.scale = 1.0

    def rate_limited(self, retry_after: float) -> int:
        """Records a 429; returns the consecutive strike count."""
        self.next_at = max(self.next_at, self.clock() + retry_after)
        self.strikes += 1
        self.successes = 0
        self.scale = min(self.scale * 2, MAX_BACKOFF_SCALE)
        return self.strikes

    @property
    def waiting(self) -> bool:
        """A stream is waiting for (or taking) this chat's slot."""
        return self._lock.locked()

    @property
    def exhausted(self) -> bool:
        return self.strikes >= DEGRADE_AFTER_STRIKES


class RateLimiter:
    """The gates, by (platform, bot, chat)."""

    def __init__(
        self, clock: Clock = time.monotonic, max_gates: int = MAX_GATES, idle_ttl_s: float = GATE_IDLE_TTL_S
    ) -> None:
        self.clock = clock
        self._gates: BoundedMap[GateKey, ChatGate] = BoundedMap(max_gates, idle_ttl_s, self._pinned, clock)
        # Gates evicted from `_gates` but still held by a stream: the same object must come back.
        self._held: weakref.WeakValueDictionary[GateKey, ChatGate] = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        return len(self._gates)

    def gate(self, platform: str, bot: str, chat_id: str, min_gap: float) -> ChatGate:
        key = (platform, bot, chat_id)
        gate = self._gates.get(key) or self._held.get(key)
        if gate is None:
            gate = ChatGate(min_gap, self.clock)
            self._held[key] = gate
        self._gates.set(key, gate)
        return gate

    def _pinned(self, _key: GateKey, gate: ChatGate) -> bool:
        # A chat whose next slot is ahead (a 429's retry_after, or the spacing) keeps its gate.
        return gate.next_at > self.clock() or gate.waiting
