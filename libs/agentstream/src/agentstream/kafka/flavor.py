"""What differs between the brokers we run on, chosen in one place: `tuning(kafka)`.

Tansu (the embedded broker) and Apache Kafka answer the same protocol but not the same way:

- **Producers.** Kafka: idempotent producers (no duplicate from a retried send) with
  `acks=all`. Tansu does not support idempotent producers; `acks=all` costs nothing there
  (one node), so both flavors wait for the full acknowledgement.
- **Fetch wait.** Kafka wakes a parked fetch as soon as records arrive, so the wait only
  bounds idle polls: Kafka's own default (500 ms). Tansu answers a fetch only when the wait
  expires, so the wait is per-hop latency: 10 ms.
- **Idle consumers.** Kafka: nothing to do (a parked fetch costs nothing). Tansu: a 10 ms wait
  is 100 fetches a second per consumer, records or not; a subscriber's consumer is paused after
  0.25 s without records and wakes at once when this process writes to its topics, or when
  another process on this machine does (its notice once the broker acknowledged the record, a
  broker on loopback only: `agentstream.kafka.near_doorbell`), else within 10 ms while a
  conversation is under way (10 s after a message's topic moved), within 0.1 s after that
  (`agentstream.kafka.idle`, `agentstream.kafka.end_watch`; a service composes them as one part,
  `agentstream.kafka.tansu_idle`, built on Tansu only).
- **End offsets.** Kafka's ListOffsets answers the log end. Tansu's answers the last record
  batch's base offset + 1, inside that batch: a reader "up to the end" keeps the whole batch
  it fetched rather than cutting at the listed offset (`within_end`).

`kafka.flavor: auto` is Tansu when `kafka.in_memory`, else read off the broker's ApiVersions
when a service starts (`resolve_flavor`): every Apache Kafka broker since 0.11 answers
OffsetForLeaderEpoch (it keeps leader epochs for replication); Tansu does not.
`kafka.enable_idempotence` and `kafka.fetch_max_wait_ms` still override the flavor's choice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

import structlog
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.admin import ApiVersionRequest

from agentstream.config import KafkaFlavor, KafkaSettings
from agentstream.kafka.idle import IdlePacing
from agentstream.kafka.security import client_security

OFFSET_FOR_LEADER_EPOCH = 23  # the API key whose absence marks Tansu
DETECT_TIMEOUT_S = 10.0

log = structlog.get_logger("agentstream.kafka")  # not observability's: it imports the HTTP side


@dataclass(frozen=True)
class BrokerTuning:
    """The client settings one broker flavor gets."""

    flavor: KafkaFlavor
    idempotent: bool
    acks: str
    fetch_max_wait_ms: int
    end_offset_is_log_end: bool
    idle: IdlePacing | None = None  # None: consumers keep fetching while idle

    def within_end(self, offset: int, listed_end: int) -> bool:
        """Whether a record fetched while reading up to `listed_end` (ListOffsets' answer when
        the read began) was on the log then. Kafka: below the log end. Tansu: the listed end
        falls inside the last batch, and every record of a fetched batch counts."""
        return offset < listed_end or not self.end_offset_is_log_end


# How often aiokafka's fetch routine looks round when no fetch is due (its default 200 ms). A fetch
# in flight, a resume or a new assignment wakes it anyway, so this only paces idle, paused
# consumers: at 200 ms the idle embedded stack's nine consumers woke the loop 45 times a second.
CONSUMER_TIMEOUT_MS = 1000


# Measured on the embedded stack (bench/idle_cpu.py): probing each consumer every 0.25 s left
# ~11 % of a core, every 0.5 s ~7.5 %; one end-offsets reader per process every 0.1 s instead
# bounds what a record from another process waits on its first hop to 0.1 s; pausing after 0.25 s
# (not 0.5 s) keeps the runner's catalog consumer, woken by each catalog refresh, awake half as long.
# For 10 s after a message's topic moved the watcher reads every 10 ms instead: a chat's next message
# comes seconds later, and at 0.1 s its two cross-process hops waited 50 + 44 ms p50
# (bench/message_path.py); hot, the watcher costs ~4 % of a core more (docs/decisions.md).
TANSU_IDLE = IdlePacing(after_s=0.25, poll_s=5.0, watch_s=0.1, watch_hot_s=0.01, watch_hot_for_s=10.0)

FLAVORS: dict[KafkaFlavor, BrokerTuning] = {
    KafkaFlavor.KAFKA: BrokerTuning(
        KafkaFlavor.KAFKA, idempotent=True, acks="all", fetch_max_wait_ms=500, end_offset_is_log_end=True
    ),
    KafkaFlavor.TANSU: BrokerTuning(
        KafkaFlavor.TANSU,
        idempotent=False,
        acks="all",
        fetch_max_wait_ms=10,
        end_offset_is_log_end=False,
        idle=TANSU_IDLE,
    ),
}


def assumed_flavor(kafka: KafkaSettings) -> KafkaFlavor:
    """The flavor without asking the broker: the configured one; `auto` is Tansu when
    in memory, else Kafka (what `resolve_flavor` would find on any broker but Tansu)."""
    if kafka.flavor is not KafkaFlavor.AUTO:
        return kafka.flavor
    return KafkaFlavor.TANSU if kafka.in_memory else KafkaFlavor.KAFKA


def tuning(kafka: KafkaSettings) -> BrokerTuning:
    """The producer and consumer settings for `kafka`, with its explicit overrides applied."""
    base = FLAVORS[assumed_flavor(kafka)]
    return BrokerTuning(
        base.flavor,
        idempotent=base.idempotent if kafka.enable_idempotence is None else kafka.enable_idempotence,
        acks=base.acks,
        fetch_max_wait_ms=kafka.fetch_max_wait_ms or base.fetch_max_wait_ms,
        end_offset_is_log_end=base.end_offset_is_log_end,
        idle=base.idle,
    )


def flavor_of_api_keys(api_keys: Collection[int]) -> KafkaFlavor:
    """The flavor of a broker from the API keys its ApiVersions response lists."""
    return KafkaFlavor.KAFKA if OFFSET_FOR_LEADER_EPOCH in api_keys else KafkaFlavor.TANSU


async def detect_flavor(kafka: KafkaSettings, timeout_s: float = DETECT_TIMEOUT_S) -> KafkaFlavor:
    """Ask one broker of `kafka.bootstrap_servers` for its ApiVersions. Raises when none answers."""
    client = AIOKafkaClient(
        bootstrap_servers=kafka.bootstrap_servers,
        client_id=f"{kafka.client_id}-flavor",
        request_timeout_ms=int(timeout_s * 1000),
        **client_security(kafka),
    )
    try:
        async with asyncio.timeout(timeout_s):
            await client.bootstrap()
            node = client.get_random_node()
            if node is None:
                raise ConnectionError("no broker known")
            response = await client.send(node, ApiVersionRequest())
    finally:
        await client.close()
    return flavor_of_api_keys({api_key for api_key, _, _ in response.api_versions})


async def resolve_flavor(kafka: KafkaSettings) -> KafkaSettings:
    """`kafka` with a concrete flavor: `auto` is detected unless in memory. A broker that does
    not answer leaves Kafka's settings (the deployed broker's), with a warning."""
    if kafka.flavor is not KafkaFlavor.AUTO:
        return kafka
    if kafka.in_memory:
        return kafka.model_copy(update={"flavor": KafkaFlavor.TANSU})
    try:
        flavor = await detect_flavor(kafka)
    except Exception as err:  # the type only: an exception's text may name hosts
        log.warning(
            "kafka flavor not detected; using Kafka's settings (set kafka.flavor to skip detection)",
            error=type(err).__name__,
        )
        flavor = KafkaFlavor.KAFKA
    return kafka.model_copy(update={"flavor": flavor})
