"""`kill -9` of the tool-executor at each point of a call, then a restart.

Several runs each make one calculator call; the executor is a child process whose
calculator logs every execution to a file (tests/chaos/tool_executor_child.py). It is
killed (1) while the calls run, (2) after the results were published but before they were
stored, (3) after they were stored but before the offsets were committed. After
the restart every run must end `completed` with its exact final text, every call must
have run at most once (the file) and be answered once per run (no call lost), and no
`tool_calls` row may be left `running`.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, ToolCallResult, User
from agentstream.host import ServiceHost
from agentstream.kafka import create_topics, free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import make_test_settings
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.call_store import STOPPED_DURING_CALL
from tests.chaos.processes import ServiceProcess, service_env

pytestmark = pytest.mark.chaos

RUNS = 4


def endings(records: list[RawRecord]) -> list[RunFinished]:
    out = []
    for r in records:
        if b'"run.finished"' in (r.value or b""):
            event = RunEventAdapter.validate_json(r.value)
            if isinstance(event, RunFinished):
                out.append(event)
    return out


def executions(log: Path) -> list[str]:
    return [json.loads(line)["expression"] for line in log.read_text().splitlines()] if log.exists() else []


def rows(db: Path) -> list[tuple[str, str, Any]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT call_id, state, result FROM tool_calls ORDER BY call_id").fetchall()


async def until(predicate: Any, timeout: float = 30.0) -> None:
    for _ in range(int(timeout * 10)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"not reached in {timeout} s")


SCENARIOS = {
    # (CHAOS_MODE, tool delay, what the killed executor must have reached, what the calls answer after the restart)
    "in_flight": ("normal", 30.0, "executing", "stopped"),
    "published_not_stored": ("hold_store", 0.0, "finished", "result"),
    "published_not_committed": ("no_commit", 0.5, "finished", "result"),
}


def first_request_of(question: str) -> Callable[[dict[str, Any]], bool]:
    """Matches a run's first model request (its question, no tool answer yet): the runs are
    concurrent, so a run that got its result early asks again before the last run first asks."""

    def matches(body: dict[str, Any]) -> bool:
        messages = body["messages"]
        return not any(m["role"] == "tool" for m in messages) and messages[-1]["content"] == question

    return matches


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_tool_executor_killed_runs_each_call_at_most_once_and_loses_none(
    scenario: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    mode, delay, kill_at, answer = SCENARIOS[scenario]
    db, tool_log = tmp_path / "chaos.db", tmp_path / "executions.log"
    async with FakeOpenAI() as fake:
        questions = [f"question {i} of {scenario}" for i in range(RUNS)]
        for i, question in enumerate(questions):  # every run's first turn: one calculator call of its own
            fake.add_turn(tool_calls=[("calculator", {"expression": f"{i + 1}*7"})], when=first_request_of(question))
        # the second turns are echoes: each run's final text is its own question
        connectors = [{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}]
        settings = make_test_settings(
            kafka_bootstrap,
            topic_prefix,
            f"sqlite+aiosqlite:///{db}",
            connectors=connectors,
            default_connector="fake",
            runner={"coalesce_ms": 10, "tool_timeout_s": 120},
        )
        await create_topics(settings.kafka)
        # The runner must still wait for the calls when the restarted executor answers them (a loaded
        # machine restarts slowly): a long tool timeout, so no answer is the runner's own "timed out".
        env = {**service_env(settings, runner__tool_timeout_s="120"), "CHAOS_TOOL_LOG": str(tool_log)}
        port = free_port()
        child = "tests.chaos.tool_executor_child"
        killed_env = {**env, "CHAOS_MODE": mode, "CHAOS_TOOL_DELAY_S": str(delay)}
        first = ServiceProcess("tool-executor", killed_env, port, tmp_path, "first", module=child)
        second = ServiceProcess("tool-executor", env, port, tmp_path, "second", module=child)
        runner = runner_bootstrap(settings)
        starts = [
            StartRun(
                run_id=f"run-{scenario}-{i}",
                conversation_key=f"web:tools-{i}",
                assistant_id="default",
                user=User(id="u1"),
                text=questions[i],
                reply_target=ReplyTarget(platform="web", chat_id=f"tools-{i}"),
            )
            for i in range(RUNS)
        ]
        bootstrap, t = settings.kafka.bootstrap_servers, runner.topics
        try:
            async with ServiceHost([runner], "127.0.0.1", {runner.name: free_port()}):
                await first.start()
                for start in starts:
                    await produce_raw(bootstrap, t.runs, start.to_json(), key=start.conversation_key.encode())
                if kill_at == "executing":
                    await until(lambda: len(executions(tool_log)) == RUNS)
                else:
                    await read_until(bootstrap, t.events, lambda rs: len(endings(rs)) >= RUNS, timeout=60)
                if mode == "no_commit":  # the kill lands after the store: a result is stored up to
                    # RESULT_WAIT_S after its publication (call_store.py), and the runs may end sooner
                    await until(lambda: [state for _, state, _ in rows(db)] == ["done"] * RUNS)
                first.kill9()
                await second.start()
                records = await read_until(bootstrap, t.events, lambda rs: len(endings(rs)) >= RUNS, timeout=60)
                if scenario != "in_flight":  # the restart re-reads every uncommitted call
                    await read_until(bootstrap, t.tool_results, lambda rs: len(rs) >= 2 * RUNS, timeout=60)
                await asyncio.sleep(1.0)  # late duplicates would show up here
                records = await read_until(bootstrap, t.events, lambda rs: len(endings(rs)) >= RUNS)
                results = await read_until(bootstrap, t.tool_results, lambda rs: len(rs) >= RUNS)
        finally:
            first.stop()
            second.stop()

    finals = {e.root_run_id: e for e in endings(records)}
    assert len(endings(records)) == RUNS  # one ending per run: none lost, none twice
    for start in starts:
        end = finals[start.run_id]
        assert (end.status, end.text) == ("completed", start.text)  # exact final
    # every call ran at most once; none was run again after the restart
    ran = executions(tool_log)
    assert len(ran) == len(set(ran)) == RUNS
    # every call answered (once per run as the model saw it), with what the scenario allows
    answered = [m for r in fake.requests for m in r.messages if m.get("role") == "tool"]
    assert len(answered) == RUNS
    expected = {f"{i + 1}*7": str((i + 1) * 7) for i in range(RUNS)}
    for message in answered:
        if answer == "stopped":
            assert message["content"] == f"error: {STOPPED_DURING_CALL}"
        else:
            assert message["content"] in expected.values()
    published = [ToolCallResult.model_validate_json(r.value) for r in results]
    if scenario == "published_not_stored":
        # the claims were left `running`: each redelivery is answered "stopped", which the runs,
        # holding the real result already, ignored (the model saw only the real ones, above)
        assert len({p.id for p in published}) == 2 * RUNS
        assert sorted(p.error or "" for p in published).count(STOPPED_DURING_CALL) == RUNS
    else:  # replays are the stored records themselves (same id), never a new execution
        assert len({p.id for p in published}) == RUNS
    assert [r[1] for r in rows(db)] == ["done"] * RUNS  # nothing left `running`
