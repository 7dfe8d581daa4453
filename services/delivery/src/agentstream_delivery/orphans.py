"""Orphan stubs: a send whose answer never came may have posted a message delivery cannot address.

The segment's next text goes out as a new message (docs/delivery.md), so the chat would keep the
first one as a stub ("Brok ▉"). On a platform with an `OrphanProbe` (Telegram), once the send's
late-landing window has passed, the ids around the stream's next message are probed with the
stub's exact text: the message that shows it is the orphan, and it is deleted.

`candidates` is the decision (which ids, nearest first); `remove` carries the probes out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice, zip_longest

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import AdapterError, NotFound, OrphanProbe, Probe, RateLimited
from agentstream_delivery.ratelimit import ChatGate

# Ids probed per orphan, at most: the orphan is next to the stream's next message unless other
# messages (the bot's private chats and basic groups share one id sequence) came between.
PROBE_SPAN = 12
PROBE_POOL = 8 * PROBE_SPAN  # the nearest ids looked up in the ledger, to pick the span from those it does not know
FARTHEST = 1000  # ids further than this from the stream's next message are never probed
RATE_LIMITED_TRIES = 3  # 429s on one probe before the search gives up
# Passes over the ids whose probe failed (timed out, 5xx): a failed probe says nothing about the
# id, and on a slow platform the orphan's own probe is the one most likely to time out.
FAILED_PROBE_PASSES = 3
FAILED_PROBE_PAUSE_S = 0.5


@dataclass(frozen=True)
class Orphan:
    """A send of unknown outcome: what it sent, and where its message can be."""

    segment: int
    text: str  # as sent (the rendering, or its plain fallback): the probe must match it exactly
    markup: TextFormat
    floor: int | None  # the newest id of the stream's messages when the send left: the orphan's is above
    lands_by: float  # epoch seconds: by then it has landed or never will


def numeric(message_id: str | None) -> int | None:
    return int(message_id) if message_id is not None and message_id.isdigit() else None


def candidates(
    orphan: Orphan, anchors: Iterable[int], span: int = PROBE_SPAN, probable: Callable[[int], bool] = lambda _: True
) -> list[int]:
    """The ids to probe, nearest first, given the ids of the stream's own messages (`anchors`).

    Around the first message the stream posted after the orphan's send left, N: N-1 (its answer
    was lost, it landed before N), N+1 (it landed late, after N), N-2, N+2… never at or below
    `floor`. With no such message: upwards from the floor. Only ids `probable` says may be the
    orphan count, and nearness is counted in those on each side, not in raw ids: when other streams'
    messages crowd one side of N, the unknown ids on that side are not searched later for it."""
    own = set(anchors)
    lowest = max(orphan.floor or 0, 0)

    def side(ids: Iterable[int]) -> Iterator[int]:
        return (i for i in ids if i > lowest and i not in own and probable(i))

    after = sorted(a for a in own if orphan.floor is None or a > orphan.floor)
    if after:
        below = side(after[0] - d for d in range(1, FARTHEST + 1))
        above = side(after[0] + d for d in range(1, FARTHEST + 1))
        order: Iterator[int] = (i for pair in zip_longest(below, above) for i in pair if i is not None)
    elif orphan.floor is not None:
        order = side(orphan.floor + d for d in range(1, FARTHEST + 1))
    else:
        return []
    return list(islice(order, span))


# (chat, id) of the messages among these ids that some stream's ledger row knows (`Ledger.known_ids`).
KnownIds = Callable[[Collection[str]], Awaitable[set[tuple[str, str]]]]


async def search(
    orphan: Orphan,
    own: list[int],
    known_ids: KnownIds,
    target: ReplyTarget,
    adapter: OrphanProbe,
    gate: ChatGate,
    log: structlog.stdlib.BoundLogger,
) -> str | None:
    """Probe the nearest ids no ledger row knows (`candidates`); delete the one showing the orphan's text."""
    pool = candidates(orphan, own, span=PROBE_POOL)
    # A message a ledger row knows is never probed: in this chat the probe would replace its text,
    # in another chat of the same id sequence it cannot be this chat's.
    known = await known_ids([str(i) for i in pool])
    chat = target.chat_id
    skip = {int(i) for c, i in known if c == chat or adapter.shares_ids(c, chat)}
    looked_up = set(pool)
    ids = candidates(orphan, own, PROBE_SPAN, lambda i: i in looked_up and i not in skip)
    return await remove(orphan, ids, target, adapter, gate, log)


async def remove(
    orphan: Orphan,
    ids: Iterable[int],
    target: ReplyTarget,
    adapter: OrphanProbe,
    gate: ChatGate,
    log: structlog.stdlib.BoundLogger,
) -> str | None:
    """Probe `ids` in order; delete the message that shows the orphan's text. Returns its id, if found.

    Ids whose probe failed are probed again after the pass, up to `FAILED_PROBE_PASSES` times."""
    pending = [str(i) for i in ids]
    for attempt in range(1 + FAILED_PROBE_PASSES):
        if attempt:
            await asyncio.sleep(FAILED_PROBE_PAUSE_S * attempt)
        failed: list[str] = []
        for candidate in pending:
            found = await _probe(orphan, candidate, target, adapter, gate, log)
            if found is None:
                failed.append(candidate)
            elif found is Probe.CHANGED:  # a message of the bot no ledger row knows (another program's?)
                log.warning("orphan probe replaced the text of an unknown message", message_id=candidate)
            elif found is Probe.SHOWS:
                return await _delete(orphan, candidate, target, adapter, gate, log)
        if not (pending := failed):
            break
    log.warning("orphan stub not found; it may remain", segment=orphan.segment, unprobed=pending)
    return None


async def _delete(
    orphan: Orphan,
    candidate: str,
    target: ReplyTarget,
    adapter: OrphanProbe,
    gate: ChatGate,
    log: structlog.stdlib.BoundLogger,
) -> str | None:
    await gate.acquire()
    try:
        await adapter.delete(target, candidate)
    except NotFound:
        pass  # deleted by someone else meanwhile: gone all the same
    except AdapterError as err:
        log.warning("orphan stub found, not deleted", message_id=candidate, error=repr(err))
        return None
    gate.succeeded()
    log.info("orphan stub deleted", segment=orphan.segment, message_id=candidate)
    return candidate


async def _probe(
    orphan: Orphan,
    candidate: str,
    target: ReplyTarget,
    adapter: OrphanProbe,
    gate: ChatGate,
    log: structlog.stdlib.BoundLogger,
) -> Probe | None:
    for _ in range(RATE_LIMITED_TRIES):
        await gate.acquire()
        try:
            found = await adapter.shows(target, candidate, orphan.text, markup=orphan.markup)
        except RateLimited as err:
            gate.rate_limited(err.retry_after)
            continue
        except AdapterError as err:  # this id is not settled; the next may be
            log.info("orphan probe failed", message_id=candidate, error=repr(err))
            return None
        gate.succeeded()
        return found
    return None
