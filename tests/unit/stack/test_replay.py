"""`agentstream replay`'s parts: the target a `--to` names, and the replay read from a run's archived events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentstream.contracts import MessageCompleted, ReplyTarget, RunFinished, RunStarted
from agentstream.db import Run, create_engine, session_factory, upgrade
from agentstream.db.models_persistence import RunEventRow
from agentstream_stack.replay import BadTarget, ReplayError, load_replay, parse_target


def test_targets():
    assert parse_target("console", "abcdef0123") == ReplyTarget(platform="console", chat_id="local")
    assert parse_target("web", "abcdef0123") == ReplyTarget(platform="web", chat_id="replay-abcdef01")
    assert parse_target("telegram:-42:9", "x") == ReplyTarget(platform="telegram", chat_id="-42", thread_id="9")
    for bad in ("telegram", "", ":5"):
        with pytest.raises(BadTarget):
            parse_target(bad, "x")


def ids(seq: int) -> dict[str, object]:
    return {"run_id": "run-1", "root_run_id": "run-1", "conversation_key": "memory:c", "seq": seq}


async def _store(url: str, events: list[object]) -> None:
    await upgrade(url)
    engine = create_engine(url)
    now = datetime.now(UTC)
    async with session_factory(engine).begin() as s:
        s.add(Run(run_id="run-1", root_run_id="run-1", conversation_key="memory:c", status="completed", text="hi"))
        s.add(Run(run_id="run-2", root_run_id="run-2", conversation_key="memory:c", status="completed", text=""))
        s.add_all(
            RunEventRow(root_run_id="run-1", seq=e.seq, type=e.type, event=e.model_dump(mode="json"), created_at=now)  # type: ignore[attr-defined]
            for e in events
        )
    await engine.dispose()


async def test_a_replay_is_the_archived_stream_under_a_new_identity(sqlite_url: str):
    start = RunStarted(
        **ids(1), assistant_id="a", connector_id="d", reply_target=ReplyTarget(platform="memory", chat_id="c")
    )
    # Stored out of order: read back in seq order.
    await _store(
        sqlite_url,
        [
            RunFinished(**ids(3), status="completed", text="hi"),
            start,
            MessageCompleted(**ids(2), message_id="m", text="hi"),
        ],
    )
    target = ReplyTarget(platform="console", chat_id="local")
    plan = await load_replay(sqlite_url, "run-1", target, "rep-1")
    assert (plan.replay_id, plan.replay_of, plan.target) == ("rep-1", "run-1", target)
    assert [(e.type, e.seq, e.root_run_id) for e in plan.events] == [
        ("run.started", 1, "rep-1"),
        ("message.completed", 2, "rep-1"),
        ("run.finished", 3, "rep-1"),
    ]


async def test_runs_that_cannot_be_replayed_are_named(sqlite_url: str):
    await _store(sqlite_url, [])
    target = ReplyTarget(platform="console", chat_id="local")
    with pytest.raises(ReplayError, match="unknown run nope"):
        await load_replay(sqlite_url, "nope", target)
    with pytest.raises(ReplayError, match="several runs"):
        await load_replay(sqlite_url, "run-", target)
    with pytest.raises(ReplayError, match="no archived stream"):
        await load_replay(sqlite_url, "run-2", target)
