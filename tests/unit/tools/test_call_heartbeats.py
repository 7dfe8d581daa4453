"""Heartbeats of a running call: every interval while it runs, none after, a lost beat not fatal."""

from __future__ import annotations

import asyncio

from agentstream.contracts import RunEventAdapter, ToolCallRequest, ToolHeartbeat
from agentstream_tools.call_heartbeats import beat_of, heartbeats

INTERVAL_S = 0.05


def request(call_seq: int | None = 7) -> ToolCallRequest:
    return ToolCallRequest(
        run_id="child",
        root_run_id="root",
        conversation_key="web:a",
        call_id="c1",
        tool="slow",
        arguments="{}",
        call_seq=call_seq,
    )


async def test_a_running_call_beats_every_interval_and_stops_with_the_call():
    beats: list[ToolHeartbeat] = []

    async def publish(beat: ToolHeartbeat) -> None:
        beats.append(beat)

    async with heartbeats(request(), publish, INTERVAL_S):
        async with asyncio.timeout(30):  # waiting for three beats, not timing them
            while len(beats) < 3:  # noqa: ASYNC110 - the beats are the heartbeat task's doing
                await asyncio.sleep(INTERVAL_S)
    count = len(beats)
    await asyncio.sleep(INTERVAL_S * 3)

    assert len(beats) == count  # none after the call ended
    assert all((b.root_run_id, b.run_id, b.call_id, b.tool, b.seq) == ("root", "child", "c1", "slow", 7) for b in beats)
    elapsed = [b.elapsed_ms for b in beats]
    assert elapsed[0] >= INTERVAL_S * 1000 * 0.9
    # One beat per interval at most, whatever the load (a loaded machine only spaces them more).
    assert all(b - a >= INTERVAL_S * 1000 * 0.9 for a, b in zip(elapsed, elapsed[1:], strict=False)), elapsed


async def test_a_quick_call_sends_no_beat():
    beats: list[ToolHeartbeat] = []

    async def publish(beat: ToolHeartbeat) -> None:
        beats.append(beat)

    async with heartbeats(request(), publish, 1.0):
        await asyncio.sleep(0.01)
    assert beats == []


async def test_a_beat_that_cannot_be_published_does_not_stop_the_next_ones():
    tried: list[float] = []

    async def publish(beat: ToolHeartbeat) -> None:
        tried.append(beat.elapsed_ms)
        if len(tried) == 1:
            raise ConnectionError("broker away")

    async with heartbeats(request(), publish, INTERVAL_S):
        await asyncio.sleep(INTERVAL_S * 3.5)
    assert len(tried) >= 2


async def test_the_beat_repeats_the_tool_call_seq_or_zero_and_decodes_as_a_run_event():
    beat = beat_of(request(call_seq=None), 1.5)
    assert (beat.seq, beat.elapsed_ms) == (0, 1500.0)
    decoded = RunEventAdapter.validate_json(beat_of(request(), 2.0).to_json())
    assert isinstance(decoded, ToolHeartbeat) and decoded.type == "tool.heartbeat" and decoded.seq == 7
