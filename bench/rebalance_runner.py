"""`agentstream serve agent-runner` with the group membership settings of `bench.rebalance_cost`'s
variant: `BENCH_SESSION_TIMEOUT_MS`, `BENCH_HEARTBEAT_INTERVAL_MS` and `BENCH_GROUP_INSTANCE_ID`
(static membership) added to every group consumer's options, before the service is built.

    python -m bench.rebalance_runner serve agent-runner --port PORT
"""

from __future__ import annotations

import os
from typing import Any

from agentstream.config import KafkaSettings
from agentstream.parts import kafka_link

_plain = kafka_link.consumer_options


def membership_options(kafka: KafkaSettings) -> dict[str, Any]:
    options = dict(_plain(kafka))
    if session := os.environ.get("BENCH_SESSION_TIMEOUT_MS"):
        options["session_timeout_ms"] = int(session)
    if heartbeat := os.environ.get("BENCH_HEARTBEAT_INTERVAL_MS"):
        options["heartbeat_interval_ms"] = int(heartbeat)
    if instance := os.environ.get("BENCH_GROUP_INSTANCE_ID"):
        options["group_instance_id"] = instance
    return options


kafka_link.consumer_options = membership_options  # type: ignore[assignment]  # what `KafkaLink.source` reads

if __name__ == "__main__":
    from agentstream_stack.cli import main

    main()
