"""The stream actor: its timer, its adapter calls, previews held for the chat's budget, and a stream
resumed from its ledger after a crash."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import structlog

from agentstream.config import TextFormat
from agentstream.contracts import LedgerState, ReplyTarget
from agentstream_delivery.adapters import MemoryAdapter
from agentstream_delivery.hooks.base import TransformContext
from agentstream_delivery.ledger import LedgerEntry, LedgerScope, MemoryLedger, sha256
from agentstream_delivery.ratelimit import PREVIEW_RESERVE, ChatGate
from agentstream_delivery.stream_actor import Dispatch, StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, StreamInput, TextDelta, Tick
from agentstream_delivery.stream_model import StreamState

TARGET = ReplyTarget(platform="memory", chat_id="c1")


def actor(adapter: MemoryAdapter, interval: float) -> StreamActor:
    adapter.capabilities = replace(adapter.capabilities, edit_interval=interval)
    a = StreamActor(StreamKey.of("r1", TARGET), TARGET, adapter, structlog.get_logger("test"))
    a.start()
    return a


async def test_held_back_frame_is_flushed_by_the_stream_timer():
    memory = MemoryAdapter()
    a = actor(memory, interval=0.2)
    a.feed(TextDelta("m1", "Hello"))
    a.feed(TextDelta("m1", " world"))  # inside the interval: held back
    await memory.wait_for("c1", lambda ms: len(ms) == 1)
    assert memory.messages("c1")[0].text == "Hello ▉"
    # no more input arrives; the timer must still put the last frame out
    msgs = await memory.wait_for("c1", lambda ms: ms[0].edits == 1, timeout=2)
    assert msgs[0].text == "Hello world ▉"
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert a.state is StreamState.DELIVERED
    [msg] = memory.messages("c1")
    assert msg.text == "Hello world" and msg.final
    assert msg.history == ["Hello ▉", "Hello world ▉", "Hello world"]


async def test_failed_send_does_not_lose_the_final_text():
    memory = MemoryAdapter()

    class FlakySend(MemoryAdapter):
        calls = 0

        async def send(self, target: ReplyTarget, text: str, *, final: bool = False, **_: object) -> str:
            FlakySend.calls += 1
            if FlakySend.calls == 1:
                raise ConnectionError("platform down")
            return await memory.send(target, text, final=final)

    a = actor(FlakySend(), interval=0.01)
    a.feed(TextDelta("m1", "Hello world"))
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert [(m.text, m.final) for m in memory.messages("c1")] == [("Hello world", True)]


# -- a stream resumed from its ledger ------------------------------------------------------------
SCOPE = LedgerScope("memory", "c1", "r1", "memory:c1")


async def replay(memory: MemoryAdapter, ledger: MemoryLedger, *inputs: StreamInput) -> None:
    """A restarted stream over the ledger rows of its first life, fed `inputs` until it closes."""
    a = StreamActor(
        StreamKey.of("r1", TARGET),
        TARGET,
        memory,
        structlog.get_logger("test"),
        ledger=ledger,
        conversation_key=SCOPE.conversation_key,
    )
    a.start()
    for inp in inputs:
        a.feed(inp)
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)


async def test_resumed_stream_edits_the_posted_message_instead_of_posting_again():
    memory = MemoryAdapter(edit_interval=0.01)
    posted = await memory.send(TARGET, "Hello wo ▉")  # before the crash
    ledger = MemoryLedger()
    await ledger.record(SCOPE, LedgerEntry(0, "sent", posted, len("Hello wo ▉"), sha256("Hello wo ▉")))
    pieces = [TextDelta("m1", piece) for piece in ("Hello", " wo", "rld")]  # the replay from the committed offset
    await replay(memory, ledger, *pieces, Finish("completed"))
    [msg] = memory.messages("c1")
    assert msg.text == "Hello world" and msg.final
    assert ledger.rows[("memory", "c1", "r1", 0)].landed("Hello world")


async def test_send_cut_off_by_a_crash_is_unknown_and_the_final_goes_out_as_a_new_message():
    memory = MemoryAdapter(edit_interval=0.01)
    ledger = MemoryLedger()
    await ledger.record(SCOPE, LedgerEntry(0, LedgerState.SENDING, None, 5, sha256("Hi ▉")))  # cut off by kill -9
    await replay(memory, ledger, TextDelta("m1", "Hi there"), Finish("completed"))
    assert [m.text for m in memory.messages("c1")] == ["Hi there"]  # the segment is not lost
    assert ledger.rows[("memory", "c1", "r1", 0)].landed("Hi there")


async def test_pending_row_never_left_and_is_sent_after_restart():
    memory = MemoryAdapter(edit_interval=0.01)
    ledger = MemoryLedger()
    await ledger.record(SCOPE, LedgerEntry(0, LedgerState.PENDING))  # waited behind a 429 when killed
    await replay(memory, ledger, Finish("completed", text="The whole answer"))
    assert [m.text for m in memory.messages("c1")] == ["The whole answer"]
    assert {e.state for e in ledger.rows.values()} == {LedgerState.SENT}


# -- the final is not held behind previews ---------------------------------------------------------
class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class TimedMemory(MemoryAdapter):
    """Records when (on the fake clock) each call reached the platform."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(edit_interval=1.0)
        self.clock = clock
        self.calls: list[tuple[float, str, bool]] = []

    async def send(self, target: ReplyTarget, text: str, *, final: bool = False, **kw: object) -> str:
        self.calls.append((self.clock.now, text, final))
        return await super().send(target, text, final=final)

    async def edit(self, target: ReplyTarget, message_id: str, text: str, *, final: bool = False, **kw: object) -> None:
        self.calls.append((self.clock.now, text, final))
        await super().edit(target, message_id, text, final=final)


def gated_actor(memory: TimedMemory, clock: FakeClock) -> StreamActor:
    """A stream to a chat of 1 call/s whose last call left at 100.0: its next slot is at 101.0."""
    gate = ChatGate(min_gap=1.0, clock=clock, next_at=101.0)
    a = StreamActor(StreamKey.of("r1", TARGET), TARGET, memory, structlog.get_logger("test"), clock, gate=gate)
    a.start()
    return a


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(2):
        while not condition():  # noqa: ASYNC110 - polls state the stream task changes, no event to wait on
            await asyncio.sleep(0.001)


async def test_final_supersedes_a_held_preview_and_takes_the_chats_next_slot():
    clock = FakeClock()
    memory = TimedMemory(clock)
    a = gated_actor(memory, clock)
    a.feed(TextDelta("m1", "Hello world"))
    await until(lambda: a.dispatch is Dispatch.HOLDING)  # previews wait for 101.0 plus the reserve
    clock.now = 101.0  # the chat's next slot: the final's, not yet a preview's
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert memory.calls == [(101.0, "Hello world", True)]  # the preview never left
    assert [m.text for m in memory.messages("c1")] == ["Hello world"]


async def test_preview_leaves_after_the_reserve_and_the_final_at_the_next_slot():
    clock = FakeClock()
    memory = TimedMemory(clock)
    a = gated_actor(memory, clock)
    a.feed(TextDelta("m1", "Hello world"))
    await until(lambda: a.dispatch is Dispatch.HOLDING)
    clock.now = 101.0 + PREVIEW_RESERVE
    a.feed(Tick())  # the stream's timer: the budget is free for a preview now
    await until(lambda: len(memory.calls) == 1)
    assert memory.calls == [(101.0 + PREVIEW_RESERVE, "Hello world ▉", False)]
    await until(lambda: a.dispatch is Dispatch.WAITING)
    clock.now = 102.0 + PREVIEW_RESERVE  # one spacing after the preview; a preview would wait the reserve more
    a.feed(TextDelta("m1", "!"))
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    assert memory.calls[1:] == [(102.0 + PREVIEW_RESERVE, "Hello world!", True)]


async def test_a_frame_that_a_transform_makes_render_like_the_shown_one_is_not_sent():
    memory = MemoryAdapter()
    memory.capabilities = replace(memory.capabilities, edit_interval=0.0, formatting=TextFormat.TELEGRAM_HTML)

    async def blank_out(text: str, ctx: TransformContext) -> str:  # a filter that leaves blank lines in a token's place
        return text.replace("#", "\n\n")

    a = StreamActor(StreamKey.of("r1", TARGET), TARGET, memory, structlog.get_logger("test"), outgoing=blank_out)
    a.start()
    a.feed(TextDelta("m1", "Hello#"))
    await memory.wait_for("c1", lambda ms: len(ms) == 1)
    # Another frame for the machine, but after the transform it renders as the one shown: no call.
    a.feed(TextDelta("m1", "#"))
    await asyncio.sleep(0.2)  # its edit is due at once: it would have gone out by now
    a.feed(Finish("completed"))
    assert a.task is not None
    await asyncio.wait_for(a.task, 2)
    [msg] = memory.messages("c1")
    assert msg.history == ["Hello\n\n▉", "Hello"]


# -- a hand-over (docs/delivery.md § Rebalance) -------------------------------------------------------
class HeldSend(MemoryAdapter):
    """A send that lands only when the test lets it answer."""

    def __init__(self) -> None:
        super().__init__(edit_interval=0.01)
        self.left = asyncio.Event()
        self.answer = asyncio.Event()

    async def send(self, target: ReplyTarget, text: str, **kw: object) -> str:
        self.left.set()
        await self.answer.wait()
        return await super().send(target, text, **kw)  # type: ignore[arg-type]


async def test_a_stream_handed_over_mid_call_ends_once_the_call_is_recorded_and_calls_no_more():
    memory = HeldSend()
    ledger = MemoryLedger()
    a = StreamActor(
        StreamKey.of("r1", TARGET),
        TARGET,
        memory,
        structlog.get_logger("test"),
        ledger=ledger,
        conversation_key="memory:c1",
    )
    a.start()
    a.feed(TextDelta("m1", "Hello"))
    await asyncio.wait_for(memory.left.wait(), 2)
    assert a.task is not None
    a.task.cancel()  # the partition is revoked while the send is in flight
    await asyncio.sleep(0.05)
    assert not a.task.done()  # the send that left is waited for
    memory.answer.set()
    await asyncio.gather(a.task, return_exceptions=True)
    assert a.task.cancelled()  # cancelled, not done: its commit hold stays for the next owner
    a.feed(TextDelta("m1", " world"))
    await asyncio.sleep(0.05)
    [msg] = memory.messages("c1")
    assert msg.text == "Hello ▉" and msg.edits == 0  # nothing after the hand-over
    # The ledger says the message landed: the next owner's replay edits it instead of posting again.
    row = ledger.rows[("memory", "c1", "r1", 0)]
    assert row.state is LedgerState.SENT and row.message_id == msg.message_id
    await replay(memory, ledger, TextDelta("m1", "Hello"), TextDelta("m1", " world"), Finish("completed"))
    [msg] = memory.messages("c1")
    assert msg.text == "Hello world" and msg.final
