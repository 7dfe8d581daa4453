import asyncio

import pytest

from agentstream_runner.coalescer import Coalescer, CoalescingSender


def test_first_text_goes_out_at_once_then_batches_within_the_window():
    c = Coalescer(window=0.05)
    assert c.push("Hel", now=0.0) == "Hel"
    assert c.push("lo", now=0.01) is None
    assert c.push(" wor", now=0.03) is None
    assert c.deadline == pytest.approx(0.05)
    assert c.take(now=0.049) is None
    assert c.take(now=0.05) == "lo wor"
    assert c.deadline is None
    # within the new window again: buffered
    assert c.push("ld", now=0.06) is None
    assert c.drain() == "ld"
    assert c.drain() == ""


def test_text_after_a_quiet_window_is_sent_at_once():
    c = Coalescer(window=0.05)
    assert c.push("a", now=0.0) == "a"
    assert c.push("b", now=0.2) == "b"


def test_late_push_carries_the_overdue_buffer():
    c = Coalescer(window=0.05)
    c.push("a", now=0.0)
    assert c.push("b", now=0.01) is None
    # the timer was late: the next push finds the window over and sends both, in order
    assert c.push("c", now=0.07) == "bc"


def test_zero_window_sends_everything_at_once():
    c = Coalescer(window=0)
    assert [c.push(t, now=0.0) for t in "abc"] == ["a", "b", "c"]


class ManualClock:
    """The sender's clock, moved by the test: what it sends is judged against this clock's
    times, never against how long a loaded machine took between two lines."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_sender_latency_first_then_timer_flush():
    sent: list[tuple[str, float]] = []
    clock = ManualClock()
    sending = asyncio.Event()

    async def send(text: str) -> None:
        sent.append((text, clock.now))
        sending.set()

    async with CoalescingSender(0.05, send, clock=clock) as sender:
        await sender.push("a")
        assert sent == [("a", 0.0)]  # at once
        sending.clear()
        clock.now = 0.01
        await sender.push("b")
        await sender.push("c")
        assert [s for s, _ in sent] == ["a"]  # batched
        # The timer wakes (more than once) while its window is still open: it sends nothing.
        await asyncio.sleep(0.15)
        assert [s for s, _ in sent] == ["a"]
        # No further text: once the window is over, the timer alone flushes the batch.
        clock.now = 0.05
        async with asyncio.timeout(10):  # waiting for the timer's round, not a speed check
            await sending.wait()
        assert sent == [("a", 0.0), ("bc", 0.05)]
        clock.now = 0.2
        await sender.push("d")  # quiet window passed: at once again
        await sender.push("e")
    assert [s for s, _ in sent] == ["a", "bc", "d", "e"]  # leaving the block flushed "e"


async def test_sender_many_fast_deltas_are_few_sends_and_keep_order():
    sent: list[str] = []
    clock = ManualClock()

    async def send(text: str) -> None:
        await asyncio.sleep(0.001)  # a publish takes time
        sent.append(text)

    words = [f"w{i} " for i in range(40)]
    async with CoalescingSender(0.03, send, clock=clock) as sender:
        for i, w in enumerate(words):
            clock.now = i * 0.005  # a delta every 5 ms, 200 ms in all, in 30 ms windows
            await sender.push(w)
            await asyncio.sleep(0)
    assert "".join(sent) == "".join(words)
    # The first at once, then about one send per window (seven of them), then what the end flushed.
    assert 5 <= len(sent) <= 10, sent


async def test_sender_drops_buffer_when_the_block_fails():
    sent: list[str] = []

    async def send(text: str) -> None:
        sent.append(text)

    with pytest.raises(asyncio.CancelledError):
        async with CoalescingSender(0.05, send) as sender:
            await sender.push("a")
            await sender.push("b")
            raise asyncio.CancelledError
    await asyncio.sleep(0.08)
    assert sent == ["a"]  # the timer was stopped too


async def test_text_pushed_while_a_send_is_under_way_goes_out_after_it():
    sent: list[str] = []
    sending = asyncio.Event()
    release = asyncio.Event()

    async def send(text: str) -> None:
        sending.set()
        await release.wait()  # a publish stuck on the broker
        sent.append(text)

    async with CoalescingSender(0, send) as sender:  # no window: every push is a send
        first = asyncio.create_task(sender.push("a"))
        await sending.wait()
        second = asyncio.create_task(sender.push("b"))
        await asyncio.sleep(0.01)
        assert sent == [] and not second.done()  # queued behind the send under way
        release.set()
        await asyncio.gather(first, second)
    assert sent == ["a", "b"]


async def test_pushes_that_only_buffer_do_not_yield_to_the_event_loop():
    sent: list[str] = []
    ticks = 0

    async def send(text: str) -> None:
        sent.append(text)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async with CoalescingSender(10.0, send) as sender:
        await sender.push("a")  # sent at once
        counting = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        before = ticks
        for word in "bcdef":
            await sender.push(word)
        assert ticks == before  # buffering never gave the loop a turn
        counting.cancel()
    assert sent == ["a", "bcdef"]
