"""Delivery's metrics as the deliverer and a stream see them: calls with their latency by
platform/op/outcome, 429s and degraded streams, ledger writes, time to the final text."""

from __future__ import annotations

import asyncio

import structlog
from prometheus_client import CollectorRegistry

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import RateLimited
from agentstream_delivery.deliverer import Deliverer
from agentstream_delivery.delivery_metrics import DeliveryMetrics
from agentstream_delivery.ledger import LedgerScope, MemoryLedger
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.ratelimit import ChatGate
from agentstream_delivery.stream_actor import StreamActor, StreamKey
from agentstream_delivery.stream_inputs import Finish, TextDelta
from tests.unit.delivery.deliverer_harness import TARGET, Scripted


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_calls_429s_degraded_streams_and_ledger_writes_are_counted():
    registry = CollectorRegistry()
    metrics = DeliveryMetrics(registry, ["scripted"])
    assert (
        _value(
            registry,
            "agentstream_delivery_platform_calls_total",
            platform="scripted",
            op="edit",
            outcome="rate_limited",
        )
        == 0
    )
    adapter = Scripted("id1", *(RateLimited(0.0) for _ in range(3)))
    d = Deliverer(
        LedgerScope("scripted", "c", "r", "k"),
        TARGET,
        adapter,
        ChatGate(0.0),
        MemoryLedger(),
        structlog.get_logger("test"),
        metrics,
    )
    await d.deliver(Send(0, "a ▉", False), "a ▉")
    await d.deliver(Edit(0, "ab ▉", False), "ab ▉")

    calls = {"platform": "scripted"}
    assert _value(registry, "agentstream_delivery_platform_calls_total", **calls, op="send", outcome="ok") == 1
    assert (
        _value(registry, "agentstream_delivery_platform_calls_total", **calls, op="edit", outcome="rate_limited") == 3
    )
    assert _value(registry, "agentstream_delivery_platform_call_seconds_count", **calls, op="edit") == 3
    assert _value(registry, "agentstream_delivery_degraded_streams_total", **calls) == 1
    # Each refused edit puts the row back as it was (sent): one send and three restorations.
    assert _value(registry, "agentstream_delivery_ledger_writes_total", state="sent") == 4
    assert _value(registry, "agentstream_delivery_ledger_writes_total", state="sending") == 4


async def test_time_from_finish_read_to_stream_closed_is_observed():
    registry = CollectorRegistry()
    metrics = DeliveryMetrics(registry)
    target = ReplyTarget(platform="scripted", chat_id="c")
    actor = StreamActor(StreamKey.of("r1", target), target, Scripted(), structlog.get_logger("test"), observe=metrics)
    actor.start()
    actor.feed(TextDelta("m1", "hello"))
    actor.feed(Finish("completed", text="hello"))
    async with asyncio.timeout(5):
        await actor.wait_closed()
    assert _value(registry, "agentstream_delivery_visible_seconds_count", platform="scripted") == 1
    assert actor.task is not None
    actor.task.cancel()
