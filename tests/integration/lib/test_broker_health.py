"""BrokerHealth against a real embedded broker: killed, restarted on the same port (a new
cluster without topics), restarted as the same cluster, topics missing with and without
`kafka.auto_create_topics`."""

from __future__ import annotations

import asyncio
import uuid

from agentstream.config import load_settings
from agentstream.kafka import EmbeddedBroker, Topics, create_topics, free_port
from agentstream.kafka.health import NOT_CHECKED, BrokerHealth, BrokerUnavailable
from agentstream.observability import get_logger


class Calls:
    def __init__(self) -> None:
        self.lost = self.back = self.new_cluster = 0

    def on_lost(self) -> None:
        self.lost += 1

    def on_back(self) -> None:
        self.back += 1

    async def on_new_cluster(self) -> None:
        self.new_cluster += 1


def health_for(bootstrap: str, prefix: str, calls: Calls, auto_create: bool) -> BrokerHealth:
    kafka = load_settings(
        kafka={
            "bootstrap_servers": bootstrap,
            "topic_prefix": prefix,
            "in_memory": True,
            "partitions": 2,
            "auto_create_topics": auto_create,
        }
    ).kafka
    return BrokerHealth(
        kafka,
        Topics(prefix).all(),
        get_logger("test.health"),
        client_id="test-health",
        on_new_cluster=calls.on_new_cluster,
        on_lost=calls.on_lost,
        on_back=calls.on_back,
    )


async def test_missing_topics_not_ready_until_created_when_auto_create_is_off() -> None:
    calls = Calls()
    async with EmbeddedBroker() as broker:
        health = health_for(broker.bootstrap_servers, f"h{uuid.uuid4().hex[:8]}.", calls, auto_create=False)
        assert health.reason == NOT_CHECKED
        try:
            await health.check()
            assert health.reason is not None and health.reason.startswith("topics missing: ")
            assert "inbound" in health.reason
            try:
                health.raise_if_down()
                raise AssertionError("raise_if_down passed while topics are missing")
            except BrokerUnavailable as err:
                assert err.reason == health.reason
            await create_topics(health.kafka)
            await health.check()
            assert health.ok and health.cluster_id == broker.cluster_id
        finally:
            await health.close()
    assert (calls.lost, calls.back, calls.new_cluster) == (0, 0, 0)


async def test_broker_killed_then_a_new_cluster_then_the_same_cluster_again() -> None:
    calls = Calls()
    port = free_port()
    broker = EmbeddedBroker(port=port)
    await asyncio.to_thread(broker.start)
    health = health_for(broker.bootstrap_servers, f"h{uuid.uuid4().hex[:8]}.", calls, auto_create=True)
    try:
        await health.check()  # creates the topics: auto_create is on
        assert health.ok, health.reason
        first_cluster = health.cluster_id

        broker.stop()
        await health.check()
        assert health.reason is not None and health.reason.startswith("kafka not answering")
        assert calls.lost == 1
        await health.check()
        assert calls.lost == 1  # once per loss

        broker = EmbeddedBroker(port=port)  # memory storage: a new cluster, no topics
        await asyncio.to_thread(broker.start)
        await health.check()
        assert health.ok, health.reason
        assert health.cluster_id == broker.cluster_id != first_cluster
        assert (calls.new_cluster, calls.back) == (1, 0)

        same = broker.cluster_id
        broker.stop()
        await health.check()
        broker = EmbeddedBroker(port=port, cluster_id=same)
        await asyncio.to_thread(broker.start)
        await health.check()
        assert health.ok, health.reason
        assert (calls.lost, calls.new_cluster, calls.back) == (2, 1, 1)
    finally:
        await health.close()
        broker.stop()
