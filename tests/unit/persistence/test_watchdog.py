"""The watchdog's tick on a service that is not started: what it publishes, what it forgets."""

from __future__ import annotations

from typing import Any

from agentstream.config import load_settings
from agentstream.contracts import Notice, ReplyTarget, RunFinished, RunQueued, RunStarted
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_persistence.buffers import BufferState

TARGET = ReplyTarget(platform="web", chat_id="c1")


def ids(root: str, seq: int) -> dict[str, Any]:
    return {"run_id": root, "root_run_id": root, "conversation_key": "web:c1", "seq": seq}


async def test_a_stale_run_gets_one_runner_lost_ending_and_a_refused_one_is_forgotten():
    svc = bootstrap_persistence(load_settings(resume={"stale_after_s": 10}))
    published: list[tuple[str, Any, str]] = []

    async def publish(topic: str, record: Any, key: str) -> None:
        published.append((topic, record, key))

    svc.publish = publish  # type: ignore[method-assign]
    svc.buffers.add(RunQueued(**ids("lost", 0), assistant_id="default", reply_target=TARGET), now=0.0)
    svc.buffers.add(
        RunStarted(**ids("lost", 1), assistant_id="default", connector_id="c", reply_target=TARGET), now=0.0
    )
    svc.buffers.add(RunQueued(**ids("refused", 0), assistant_id="default", reply_target=TARGET), now=0.0)
    svc.buffers.add(Notice(**ids("refused", 1), text="not authorized"), now=0.0)

    await svc.end_stale_runs(now=5.0)
    assert published == [] and len(svc.buffers) == 2  # not silent for long enough yet

    await svc.end_stale_runs(now=11.0)
    [(topic, ending, key)] = published
    assert topic == svc.topics.events and key == "web:c1"
    assert isinstance(ending, RunFinished) and (ending.root_run_id, ending.reason, ending.seq) == (
        "lost",
        "runner_lost",
        2,
    )
    assert svc.buffers.get("refused") is None
    lost = svc.buffers.get("lost")
    assert lost is not None and lost.state is BufferState.LOST

    await svc.end_stale_runs(now=30.0)
    assert len(published) == 1  # one ending per lost run, until it is read back
