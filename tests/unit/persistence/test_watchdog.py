"""The watchdog's tick on a service that is not started: what it publishes, what it forgets, and
what it counts (`agentstream_persistence_lost_runs_total`, read by the stale-runs panel and the
AgentstreamRunsLost alert)."""

from __future__ import annotations

from typing import Any

from agentstream.config import load_settings
from agentstream.contracts import Notice, ReplyTarget, RunFinished, RunQueued, RunStarted
from agentstream.db import Run, create_engine, session_factory, upgrade
from agentstream.kafka.topics import EVENTS, Topic
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_persistence.buffers import BufferState

TARGET = ReplyTarget(platform="web", chat_id="c1")
LOST = "agentstream_persistence_lost_runs_total"


def lost_runs(svc: Any) -> float | None:
    return svc.registry.get_sample_value(LOST)


def ids(root: str, seq: int) -> dict[str, Any]:
    return {"run_id": root, "root_run_id": root, "conversation_key": "web:c1", "seq": seq}


async def test_a_stale_run_gets_one_runner_lost_ending_and_a_refused_one_is_forgotten():
    svc = bootstrap_persistence(load_settings(resume={"stale_after_s": 10}))
    published: list[tuple[Topic[Any], Any, str]] = []

    async def publish(topic: Topic[Any], record: Any, key: str | None = None) -> None:
        published.append((topic, record, topic.key_of(record) if key is None else key))

    svc.runtime.publish = publish  # type: ignore[method-assign]
    svc.buffers.add(RunQueued(**ids("lost", 0), assistant_id="default", reply_target=TARGET), now=0.0)
    svc.buffers.add(
        RunStarted(**ids("lost", 1), assistant_id="default", connector_id="c", reply_target=TARGET), now=0.0
    )
    svc.buffers.add(RunQueued(**ids("refused", 0), assistant_id="default", reply_target=TARGET), now=0.0)
    svc.buffers.add(Notice(**ids("refused", 1), text="not authorized"), now=0.0)

    await svc.end_stale_runs(now=5.0)
    assert published == [] and len(svc.buffers) == 2  # not silent for long enough yet
    assert lost_runs(svc) == 0

    await svc.end_stale_runs(now=11.0)
    [(topic, ending, key)] = published
    assert topic is EVENTS and key == "web:c1"
    assert isinstance(ending, RunFinished) and (ending.root_run_id, ending.reason, ending.seq) == (
        "lost",
        "runner_lost",
        2,
    )
    assert svc.buffers.get("refused") is None
    lost = svc.buffers.get("lost")
    assert lost is not None and lost.state is BufferState.LOST

    assert lost_runs(svc) == 1  # the refused run is forgotten, not counted

    await svc.end_stale_runs(now=30.0)
    assert len(published) == 1  # one ending per lost run, until it is read back
    assert lost_runs(svc) == 1


async def test_a_lost_run_whose_ending_is_not_published_is_not_counted_and_tried_again():
    svc = bootstrap_persistence(load_settings(resume={"stale_after_s": 10}))
    attempts: list[Topic[Any]] = []

    async def publish(topic: Topic[Any], record: Any, key: str | None = None) -> None:
        attempts.append(topic)
        if len(attempts) == 1:
            raise ConnectionError("broker away")

    svc.runtime.publish = publish  # type: ignore[method-assign]
    svc.buffers.add(
        RunStarted(**ids("lost", 1), assistant_id="default", connector_id="c", reply_target=TARGET), now=0.0
    )
    await svc.end_stale_runs(now=11.0)
    assert len(attempts) == 1 and lost_runs(svc) == 0
    await svc.end_stale_runs(now=12.0)
    assert len(attempts) == 2 and lost_runs(svc) == 1


async def test_a_silent_run_queued_of_a_stored_run_is_forgotten_not_ended(db_url: str):
    # a restarted persistence does not remember the run ingress repeated after a crash: the runs table does
    await upgrade(db_url)
    engine = create_engine(db_url)
    async with session_factory(engine)() as s, s.begin():
        s.add(Run(run_id="stored", root_run_id="stored", conversation_key="web:c1", status="completed"))
    await engine.dispose()
    svc = bootstrap_persistence(load_settings(resume={"stale_after_s": 10}, database={"url": db_url}))
    published: list[Any] = []

    async def publish(topic: Topic[Any], record: Any, key: str | None = None) -> None:
        published.append(record)

    svc.runtime.publish = publish  # type: ignore[method-assign]
    for root in ("stored", "never-started"):
        svc.buffers.add(RunQueued(**ids(root, 0), assistant_id="default", reply_target=TARGET), now=0.0)
    try:
        await svc.end_stale_runs(now=11.0)
    finally:
        assert svc.infra.engine is not None
        await svc.infra.engine.dispose()
    assert [e.root_run_id for e in published] == ["never-started"]  # lost with its runner before it began
    assert svc.buffers.get("stored") is None and lost_runs(svc) == 1
    assert svc.buffers.add(RunQueued(**ids("stored", 0), assistant_id="default", reply_target=TARGET)) is None


async def test_silence_while_kafka_is_away_is_no_runner_lost():
    """A run in a long model call across a broker outage (or a consumer restart on a new cluster)
    could not be heard: its silence starts again when Kafka is back (CI once saw such a run ended
    `runner_lost` on the restarted broker, before the runner's heartbeat was read)."""
    svc = bootstrap_persistence(load_settings(resume={"stale_after_s": 10}))
    published: list[Any] = []

    async def publish(topic: Topic[Any], record: Any, key: str | None = None) -> None:
        published.append(record)

    async def commit() -> None:
        return None

    svc.runtime.publish = publish  # type: ignore[method-assign]
    svc.commit = commit  # type: ignore[method-assign]
    svc.buffers.add(
        RunStarted(**ids("held", 1), assistant_id="default", connector_id="c", reply_target=TARGET), now=0.0
    )
    svc.runtime.broker_health.reason = "kafka not answering (KafkaConnectionError)"
    await svc.watchdog_tick(now=5.0)
    await svc.watchdog_tick(now=40.0)  # away for long: nothing judged
    assert published == []
    svc.runtime.broker_health.reason = None  # back
    await svc.watchdog_tick(now=41.0)
    await svc.watchdog_tick(now=50.0)  # 9 s heard: still alive
    assert published == []
    await svc.watchdog_tick(now=51.5)  # 10.5 s heard and nothing from its runner: lost
    [ending] = published
    assert isinstance(ending, RunFinished) and ending.reason == "runner_lost"
