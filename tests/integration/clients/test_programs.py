"""The client programs of examples/clients/ in Java, Go, Node.js, Python and kcat, each built (once,
cached: `programs.built`) and run as its own process against one running stack on the test broker
(the embedded Tansu, or Apache Kafka with AGENTSTREAM_TEST_BROKER=kafka) and the demo model: each
produces an InboundMessage as docs/producing.md describes it and follows the answer on `events`
through a consumer group of its own (docs/clients.md).

A missing toolchain skips its program with the reason, and fails it under CI (CI=true)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from confluent_kafka import Consumer, TopicPartition

from agentstream.config import KafkaFlavor, Settings
from agentstream.kafka import Topics, create_topics
from agentstream.kafka.internals import partition_of_key
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_testing.brokers import flavor_under_test
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import read_until
from tests.e2e.conftest import DEMO_ANSWER
from tests.integration.clients.programs import PROGRAMS, ClientProgram, built, program_env

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ANSWER_TIMEOUT_S = 90
EVENT_LINE = re.compile(r"^event seq=(\d+) type=(\S+)$")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def stack_settings(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Settings]:
    """One stack for every program of the module (each with its own chat, user and group)."""
    db = tmp_path_factory.mktemp("clients") / "agentstream.db"
    settings = make_test_settings(kafka_bootstrap, f"t{uuid.uuid4().hex[:10]}.", f"sqlite+aiosqlite:///{db}")
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        yield stack.settings


def unavailable(program: ClientProgram) -> str | None:
    if program.name == "kcat" and flavor_under_test() is KafkaFlavor.TANSU:
        return "Debian's kcat (librdkafka 2.0.2) cannot read the embedded broker's ApiVersions answer (docs/clients.md)"
    if missing := program.missing_tools():
        return f"{', '.join(missing)} not on PATH: the {program.name} client cannot be built or run"
    return None


def committed_offset(bootstrap: str, group: str, topic: str, partition: int) -> int:
    """The offset `group` committed on the partition, read without joining the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        [committed] = consumer.committed([TopicPartition(topic, partition)], timeout=15)
        return int(committed.offset)
    finally:
        consumer.close()


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
async def test_client_program_sends_a_message_and_follows_the_answer(
    program: ClientProgram, stack_settings: Settings
) -> None:
    if reason := unavailable(program):
        if os.environ.get("CI") and program.missing_tools():
            pytest.fail(f"{reason} (CI must install it: .ci/run)")
        pytest.skip(reason)
    folder: Path = await asyncio.to_thread(built, program)
    kafka = stack_settings.kafka
    topics = Topics(kafka.topic_prefix)
    chat_id = f"{program.name}-{uuid.uuid4().hex[:6]}"
    group = f"{kafka.topic_prefix}{program.name}-client"
    env = program_env(
        kafka.bootstrap_servers, kafka.topic_prefix, group, chat_id, f"u-{program.name}", ANSWER_TIMEOUT_S
    )

    process = await asyncio.create_subprocess_exec(
        *program.command(folder), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), ANSWER_TIMEOUT_S + 60)
    stdout, stderr = out.decode(), err.decode()
    assert process.returncode == 0, f"{program.name} client exited {process.returncode}:\n{stderr}"
    assert stdout.strip().splitlines()[-1] == DEMO_ANSWER, stdout

    # What it followed: the whole answer of its own run, in order.
    followed = [m.groups() for line in stderr.splitlines() if (m := EVENT_LINE.match(line))]
    types = [kind for _, kind in followed]
    assert types[0] == "run.queued" and types[-1] == "run.finished", stderr
    assert {"run.started", "tool.call", "tool.result", "message.completed"} <= set(types), types
    seqs = [int(seq) for seq, _ in followed]
    assert seqs == sorted(seqs), seqs

    # What it produced: the record docs/producing.md describes, on the partition of its key.
    key = f"memory:{chat_id}".encode()
    found = await read_until(
        kafka.bootstrap_servers, topics.inbound, lambda records: any(r.key == key for r in records), timeout=30
    )
    [record] = [r for r in found if r.key == key]
    assert record.value is not None
    assert json.loads(record.value) | {"id": "-"} == {
        "type": "inbound.message",
        "id": "-",
        "platform": "memory",
        "chat_id": chat_id,
        "user": {"id": f"u-{program.name}"},
        "text": "calculate 6*7",
    }
    partition = partition_of_key(key, range(kafka.partitions))
    assert record.partition == partition  # murmur2 of the key, as agentstream's own producers

    # Its group stored its offset on the answer's partition (the conversation's partition number).
    committed = await asyncio.to_thread(committed_offset, kafka.bootstrap_servers, group, topics.events, partition)
    assert committed > 0, committed


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
async def test_client_program_without_an_answer_exits_non_zero_saying_so(
    program: ClientProgram, kafka_bootstrap: str
) -> None:
    """Topics that exist but that no agentstream service reads: the answer never comes."""
    if reason := unavailable(program):
        if os.environ.get("CI") and program.missing_tools():
            pytest.fail(f"{reason} (CI must install it: .ci/run)")
        pytest.skip(reason)
    folder: Path = await asyncio.to_thread(built, program)
    prefix = f"t{uuid.uuid4().hex[:10]}."
    await create_topics(make_test_settings(kafka_bootstrap, prefix, "sqlite+aiosqlite:///:memory:").kafka)
    env = program_env(kafka_bootstrap, prefix, f"{prefix}{program.name}-client", "nobody", "u-nobody", 3)

    process = await asyncio.create_subprocess_exec(
        *program.command(folder), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 2, (process.returncode, err.decode())
    assert out == b""
    assert f"{program.name} client: timed out after 3" in err.decode(), err.decode()
