"""Which ids an orphan stub is searched at, and how the search treats what each probe finds."""

from __future__ import annotations

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import LedgerState, ReplyTarget
from agentstream_delivery.adapters.base import NotFound, OutcomeUnknown, Probe, RateLimited, Transient
from agentstream_delivery.deliverer import Deliverer
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, MemoryLedger
from agentstream_delivery.orphans import Orphan, candidates, remove
from agentstream_delivery.platform_ops import Send
from agentstream_delivery.ratelimit import ChatGate
from tests.unit.delivery.deliverer_harness import SCOPE, Scripted, Wall
from tests.unit.delivery.deliverer_harness import TARGET as SCRIPTED_TARGET

TARGET = ReplyTarget(platform="telegram", chat_id="-1")
LOG = structlog.get_logger("test")


def orphan(floor: int | None) -> Orphan:
    return Orphan(0, "Brok ▉", TextFormat.TELEGRAM_HTML, floor, lands_by=0.0)


def test_nearest_ids_around_the_next_message_first():
    assert candidates(orphan(10), [10, 14], span=4) == [13, 15, 12, 16]


def test_never_at_or_below_the_floor_nor_the_streams_own():
    assert candidates(orphan(12), [10, 12, 14, 16], span=5) == [13, 15, 17, 18, 19]


def test_first_message_of_the_stream_has_no_floor():
    assert candidates(orphan(None), [3], span=4) == [2, 4, 1, 5]


def test_no_message_after_the_send_searches_up_from_the_floor():
    assert candidates(orphan(7), [7], span=3) == [8, 9, 10]


def test_nearness_counts_only_the_ids_that_may_be_the_orphan():
    # Eight streams at once in one id sequence (a chaos run): stubs at 1-4, the streams' next messages at 5-12
    # (known to the ledger), late stubs above. Counted in raw ids the span spent itself above N=12 and never
    # reached 1; counted in unknown ids it alternates 4, 13, 3, 14, 2, 15, 1.
    others = set(range(5, 12))
    ids = candidates(orphan(None), [12], span=12, probable=lambda i: i not in others)
    assert ids[:7] == [4, 13, 3, 14, 2, 15, 1]
    assert not others & set(ids)


def test_nothing_to_search_without_any_id():
    assert candidates(orphan(None), []) == []


class Probing:
    """An `OrphanProbe` answering each probe with the next scripted outcome."""

    def __init__(self, *outcomes: Probe | Exception, delete: Exception | None = None) -> None:
        self.outcomes = list(outcomes)
        self.probed: list[str] = []
        self.deleted: list[str] = []
        self.delete_error = delete

    async def shows(self, target: ReplyTarget, message_id: str, text: str, *, markup: TextFormat) -> Probe:
        self.probed.append(message_id)
        out = self.outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        self.deleted.append(message_id)
        if self.delete_error is not None:
            raise self.delete_error


async def test_the_message_showing_the_text_is_deleted_and_the_search_stops():
    adapter = Probing(Probe.ABSENT, Probe.SHOWS, Probe.ABSENT)
    assert await remove(orphan(None), [5, 7, 4], TARGET, adapter, ChatGate(0.0), LOG) == "7"
    assert adapter.probed == ["5", "7"] and adapter.deleted == ["7"]


async def test_a_rate_limited_probe_is_repeated_a_failed_one_skipped():
    adapter = Probing(RateLimited(0.01), Transient("reset"), Probe.CHANGED, Probe.SHOWS)
    assert await remove(orphan(None), [5, 6, 7], TARGET, adapter, ChatGate(0.0), LOG) == "7"
    assert adapter.probed == ["5", "5", "6", "7"]


async def test_a_failed_probe_is_tried_again_after_the_pass(monkeypatch):
    # On a slow platform the orphan's own probe times out: the id is probed again, not given up.
    monkeypatch.setattr("agentstream_delivery.orphans.FAILED_PROBE_PAUSE_S", 0.0)
    adapter = Probing(OutcomeUnknown("timed out"), Probe.ABSENT, Transient("502"), Probe.SHOWS)
    assert await remove(orphan(None), [5, 6], TARGET, adapter, ChatGate(0.0), LOG) == "5"
    assert adapter.probed == ["5", "6", "5", "5"] and adapter.deleted == ["5"]


async def test_probes_that_keep_failing_give_up_after_the_passes(monkeypatch):
    monkeypatch.setattr("agentstream_delivery.orphans.FAILED_PROBE_PAUSE_S", 0.0)
    adapter = Probing(*[OutcomeUnknown("timed out")] * 4)
    assert await remove(orphan(None), [5], TARGET, adapter, ChatGate(0.0), LOG) is None
    assert adapter.probed == ["5"] * 4 and adapter.deleted == []


async def test_an_orphan_deleted_meanwhile_counts_as_removed():
    adapter = Probing(Probe.SHOWS, delete=NotFound("message to delete not found"))
    assert await remove(orphan(None), [5], TARGET, adapter, ChatGate(0.0), LOG) == "5"


async def test_not_found_within_the_span_leaves_it():
    adapter = Probing(Probe.ABSENT, Probe.ABSENT)
    assert await remove(orphan(None), [5, 6], TARGET, adapter, ChatGate(0.0), LOG) is None
    assert adapter.deleted == []


class ProbingScripted(Scripted):
    """A scripted platform that also probes: the message `stub` shows the text of the lost send."""

    def __init__(self, *outcomes: object, stub: str) -> None:
        super().__init__(*outcomes)
        self.stub, self.stub_text = stub, ""
        self.deleted: list[str] = []

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        self.stub_text = self.stub_text or text  # the first send is the one whose answer is lost
        return await super().send(target, text, final=final, markup=markup)

    async def shows(self, target: ReplyTarget, message_id: str, text: str, *, markup: TextFormat) -> Probe:
        return Probe.SHOWS if (message_id, text) == (self.stub, self.stub_text) else Probe.ABSENT

    async def delete(self, target: ReplyTarget, message_id: str) -> None:
        self.deleted.append(message_id)

    def shares_ids(self, chat_id: str, other_chat_id: str) -> bool:
        return True


def restartable(adapter: Scripted, ledger: MemoryLedger, wall: Wall) -> Deliverer:
    return Deliverer(SCOPE, SCRIPTED_TARGET, adapter, ChatGate(0.0), ledger, LOG, late_landing_s=5.0, wall=wall)


async def test_the_orphan_is_searched_for_after_a_restart_too():
    ledger, wall = MemoryLedger(), Wall()
    first = ProbingScripted(OutcomeUnknown("timed out"), "12", stub="11")
    before = restartable(first, ledger, wall)
    await before.recover()
    await before.deliver(Send(0, "Brok", final=False), "Brok")
    await before.deliver(Send(0, "Broken up", final=True), "Broken up")
    assert len(await ledger.orphans(SCOPE)) == 1  # kept before the window passed: a crash now loses nothing
    # delivery dies here; the restarted one settles the stream from the ledger
    after_adapter = ProbingScripted(stub="11")
    after_adapter.stub_text = first.stub_text
    wall.now += 10
    after = restartable(after_adapter, ledger, wall)
    await after.recover()
    await after.settle()
    assert after_adapter.deleted == ["11"] and await ledger.orphans(SCOPE) == []


async def test_a_message_another_stream_knows_is_never_probed():
    ledger, wall = MemoryLedger(), Wall()
    await ledger.record(LedgerScope("scripted", "c", "earlier", "k"), LedgerEntry(0, LedgerState.SENT, "11"))
    adapter = ProbingScripted(OutcomeUnknown("timed out"), "12", stub="13")
    probed: list[str] = []
    shows = adapter.shows

    async def watching(target: ReplyTarget, message_id: str, text: str, *, markup: TextFormat) -> Probe:
        probed.append(message_id)
        return await shows(target, message_id, text, markup=markup)

    adapter.shows = watching  # type: ignore[method-assign]
    d = restartable(adapter, ledger, wall)
    await d.recover()
    await d.deliver(Send(0, "Brok", final=True), "Brok")
    wall.now += 10
    await d.settle()
    # 11 (another run's) skipped, 12 is the stream's own: the nearest unknown ids below and above, then found
    assert probed == ["10", "13"] and adapter.deleted == ["13"]
