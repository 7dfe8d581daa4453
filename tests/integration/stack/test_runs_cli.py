"""`agentstream runs list|show|resume` against real databases, the real broker and real services.

list/show read rows written by persistence's own flush (`write_run`) on SQLite and
PostgreSQL; resume produces on the test broker's `runs` topic, and, end to end, an
interrupted run (fake OpenAI model) is resumed by the CLI to completion.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from agentstream.config import Settings
from agentstream.contracts import (
    InterruptRun,
    ReplyTarget,
    RunCommandAdapter,
    RunEventAdapter,
    RunFinished,
    StartRun,
    User,
)
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.host import ServiceHost
from agentstream.kafka import Topics, free_port
from agentstream_persistence.api import add_routes
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_persistence.pages import MAX_PAGE_SIZE
from agentstream_persistence.rows import CheckpointRows, FlushRows
from agentstream_persistence.run_writes import write_run
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_stack.cli import app
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import ADMIN_HEADERS, authed_app, kafka_env
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

# The CLI's consoles are made before any invocation sets COLUMNS (tests/conftest.py): they read it
# per invocation, as a process does.

pytestmark = pytest.mark.integration

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KEY_A, KEY_B = "web:runs-a", "telegram:runs-b"


def rows(
    run_id: str,
    key: str,
    status: str,
    at: datetime,
    *,
    reason: str | None = None,
    error: str | None = None,
    steps: int = 0,
) -> FlushRows:
    """What persistence flushes for a finished run; a checkpoint when it did not complete."""
    platform, _, chat = key.partition(":")
    run = {
        "run_id": run_id,
        "root_run_id": run_id,
        "parent_run_id": None,
        "conversation_key": key,
        "session_id": "s-1",
        "assistant_id": "default",
        "connector_id": "fake",
        "user_id": "u-1",
        "status": status,
        "error": error,
        "reason": reason,
        "text": "partial" if status != "completed" else "42",
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "llm_calls": 1,
        "duration_ms": 1234.0,
        "started_at": at - timedelta(seconds=2),
        "finished_at": at,
    }
    base = {
        "conversation_key": key,
        "session_id": "s-1",
        "root_run_id": run_id,
        "run_id": run_id,
        "name": None,
        "tool_call_id": None,
        "created_at": at,
    }
    messages = [
        {**base, "seq": 1, "part": 0, "role": "user", "content": "what is 6*7?"},
        {**base, "seq": 9, "part": 0, "role": "assistant", "content": run["text"]},
    ]
    conversation = {
        "key": key,
        "platform": platform,
        "chat_id": chat,
        "thread_id": None,
        "session_id": "s-1",
        "created_at": at,
        "updated_at": at,
    }
    checkpoint = None
    if status != "completed":
        kinds = ["llm", "tool"][:steps]
        checkpoint = CheckpointRows(
            checkpoint={
                "root_run_id": run_id,
                "conversation_key": key,
                "status": status,
                "reason": reason,
                "error": error,
                "last_seq": 10,
                "usage": {"llm_calls": 1, "prompt_tokens": 10},
                "start": {"assistant_id": "default"},
                "resume_attempts": 0,
                "created_at": at,
                "updated_at": at,
            },
            steps=[
                {
                    "root_run_id": run_id,
                    "run_id": run_id,
                    "seq": 3 + i,
                    "step_id": f"{kind}-{i}",
                    "step_type": kind,
                    "input": {"messages": 2, "calls": [{"tool": "calculator"}]},
                    "output": {"content": "6*7 = 42"},
                    "memory": [{"role": "user", "content": "x"}],
                    "created_at": at,
                }
                for i, kind in enumerate(kinds)
            ],
        )
    return FlushRows(run=run, messages=messages, conversation=conversation, checkpoint=checkpoint)


async def store(url: str, *flushes: FlushRows) -> None:
    await upgrade(url)
    engine = create_engine(url)
    try:
        for f in flushes:
            await write_run(session_factory(engine), f)
    finally:
        await engine.dispose()


async def cli(*args: str, env: dict[str, str]) -> Result:
    """The CLI in a worker thread: it runs its own event loop, as from a terminal."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "220", **env})


def cli_env(settings: Settings) -> dict[str, str]:
    """The test broker's settings (its flavor's producer: idempotent on Kafka, not on Tansu) and the database."""
    return {**kafka_env(settings), "AGENTSTREAM__DATABASE__URL": settings.database.url}


async def test_list_and_show_read_what_persistence_stored(db_url: str) -> None:
    long_id = "0f3c1d2e-9a8b-4c7d-8e6f-5a4b3c2d1e0f"
    await store(
        db_url,
        rows(long_id, KEY_B, "completed", T0 - timedelta(minutes=1)),
        rows("run-done-1", KEY_A, "completed", T0),
        rows(
            "run-fail-2",
            KEY_A,
            "failed",
            T0 + timedelta(minutes=1),
            reason="runner_lost",
            error="no event for 30 s",
            steps=2,
        ),
        rows("run-stop-3", KEY_B, "interrupted", T0 + timedelta(minutes=2), reason="user"),
    )
    env = {"AGENTSTREAM__DATABASE__URL": db_url}

    listed = await cli("runs", "list", "--json", env=env)
    assert listed.exit_code == 0, listed.output
    runs = json.loads(listed.output)["items"]
    assert [(r["run_id"], r["status"], r["checkpoint"]) for r in runs] == [
        ("run-stop-3", "interrupted", True),
        ("run-fail-2", "failed", True),
        ("run-done-1", "completed", False),
        (long_id, "completed", False),
    ]
    assert runs[1]["reason"] == "runner_lost" and runs[1]["finished_at"].startswith("2025-03-01T12:01:00")

    async def ids(*args: str) -> list[str]:
        result = await cli("runs", "list", "--json", *args, env=env)
        assert result.exit_code == 0, result.output
        return [r["run_id"] for r in json.loads(result.output)["items"]]

    assert await ids("--status", "failed") == ["run-fail-2"]
    assert await ids("--status", "failed", "--status", "completed") == ["run-fail-2", "run-done-1", long_id]
    assert await ids("--resumable") == ["run-stop-3", "run-fail-2"]
    assert await ids("--conversation", KEY_A) == ["run-fail-2", "run-done-1"]
    assert await ids("--limit", "1") == ["run-stop-3"]
    bad = await cli("runs", "list", "--status", "lost", env=env)
    assert bad.exit_code == 2

    table = await cli("runs", "list", env=env)
    assert table.exit_code == 0, table.output
    line = next(ln for ln in table.output.splitlines() if "run-fail-2" in ln)
    for cell in (KEY_A, "default", "failed", "runner_lost: no event for 30 s", "2025-03-01 12:01:00", "yes"):
        assert cell in line, (cell, line)
    assert "—" in next(ln for ln in table.output.splitlines() if "run-done-1" in ln)
    assert long_id in table.output
    narrow = await cli("runs", "list", env={**env, "COLUMNS": "80"})  # ids shortened to what /resume shows
    assert narrow.exit_code == 0 and long_id not in narrow.output and "0f3c1d2e…" in narrow.output
    assert "run-fail-2" in narrow.output and "run ids shortened" in narrow.output
    by_prefix = json.loads((await cli("runs", "show", "0f3c1d2e", "--json", env=env)).output)
    assert by_prefix["run"]["run_id"] == long_id

    shown = await cli("runs", "show", "run-fail-2", "--json", env=env)
    assert shown.exit_code == 0, shown.output
    detail = json.loads(shown.output)
    assert (detail["run"]["status"], detail["run"]["error"]) == ("failed", "no event for 30 s")
    assert [(m["role"], m["content"]) for m in detail["messages"]] == [
        ("user", "what is 6*7?"),
        ("assistant", "partial"),
    ]
    assert detail["checkpoint"]["last_seq"] == 10
    assert [s["step_type"] for s in detail["checkpoint"]["steps"]] == ["llm", "tool"]
    done = json.loads((await cli("runs", "show", "run-done-1", "--json", env=env)).output)
    assert done["checkpoint"] is None and done["run"]["text"] == "42"

    text = await cli("runs", "show", "run-fail", env=env)  # a unique prefix is enough
    assert text.exit_code == 0, text.output
    for part in (
        "run run-fail-2",
        "runner_lost",
        "what is 6*7?",
        "checkpoint",
        "last seq 10",
        "llm-0",
        "tool-1",
        "6*7 = 42",
        "agentstream runs resume run-fail-2",
    ):
        assert part in text.output, (part, text.output)
    plain = await cli("runs", "show", "run-done-1", env=env)
    assert plain.exit_code == 0 and "cannot be resumed" in plain.output

    unknown = await cli("runs", "show", "no-such-run", env=env)
    assert unknown.exit_code == 1 and "unknown run no-such-run" in unknown.output
    ambiguous = await cli("runs", "show", "run-", env=env)
    assert ambiguous.exit_code == 1 and "matches several runs" in ambiguous.output


async def test_list_pages_with_cursors_shared_with_the_read_api(db_url: str) -> None:
    """Five runs, three ending at the same instant, read two at a time; a run stored between two
    pages; the table's `more:` line; the same cursors as persistence's `GET /v1/runs`."""
    await store(
        db_url,
        *[
            rows(
                f"run-{i}",
                KEY_A if i % 2 else KEY_B,
                "failed" if i == 2 else "completed",
                T0 + timedelta(minutes=min(i, 3)),
                reason="runner_lost" if i == 2 else None,
            )
            for i in range(5)
        ],
    )
    newest_first = ["run-4", "run-3", "run-2", "run-1", "run-0"]  # 2, 3 and 4 end together: by id, descending
    env = {"AGENTSTREAM__DATABASE__URL": db_url}

    async def listed(*args: str) -> dict[str, Any]:
        result = await cli("runs", "list", "--json", *args, env=env)
        assert result.exit_code == 0, result.output
        body: dict[str, Any] = json.loads(result.output)
        assert set(body) == {"items", "next_cursor"}
        return body

    first = await listed("--limit", "2")
    assert [r["run_id"] for r in first["items"]] == newest_first[:2] and first["next_cursor"]
    await store(db_url, rows("run-9", KEY_A, "completed", T0 + timedelta(hours=1)))  # newer: not on later pages
    seen, cursor = [r["run_id"] for r in first["items"]], first["next_cursor"]
    while cursor is not None and len(seen) <= len(newest_first):  # bounded: a repeating page cannot loop
        page = await listed("--limit", "2", "--cursor", cursor)
        seen += [r["run_id"] for r in page["items"]]
        cursor = page["next_cursor"]
    assert seen == newest_first
    assert (await listed("--limit", "6"))["next_cursor"] is None  # all six on one page: no cursor

    # The same order and cursors as persistence's read API over HTTP.
    engine = create_engine(db_url)
    api = authed_app()
    add_routes(api, session_factory(engine))
    try:
        async with httpx.AsyncClient(
            headers=ADMIN_HEADERS, transport=httpx.ASGITransport(app=api), base_url="http://t"
        ) as http:
            over_http = (await http.get("/v1/runs", params={"limit": 3})).json()
            from_cli = await listed("--limit", "3")
            assert over_http["items"] == [{k: v for k, v in r.items() if k != "checkpoint"} for r in from_cli["items"]]
            assert over_http["next_cursor"] == from_cli["next_cursor"]
            rest = (await http.get("/v1/runs", params={"cursor": from_cli["next_cursor"]})).json()
            assert [r["run_id"] for r in rest["items"]] == newest_first[2:]
    finally:
        await engine.dispose()

    failed = await listed("--status", "failed", "--limit", "1")
    assert [r["run_id"] for r in failed["items"]] == ["run-2"] and failed["next_cursor"] is None

    table = await cli("runs", "list", "--limit", "2", env=env)
    assert table.exit_code == 0, table.output
    [more] = [ln for ln in table.output.splitlines() if ln.startswith("more: --cursor ")]
    after_table = await listed("--limit", "2", "--cursor", more.removeprefix("more: --cursor "))
    assert [r["run_id"] for r in after_table["items"]] == newest_first[1:3]  # run-9 came first in the table
    last = await cli("runs", "list", "--limit", "10", env=env)
    assert last.exit_code == 0 and "more:" not in last.output

    for bad in ("not-a-cursor", from_cli["items"][0]["run_id"], "", "eyJ4IjoxfQ"):
        refused = await cli("runs", "list", "--cursor", bad, env=env)
        assert refused.exit_code == 2 and "invalid cursor" in refused.output, (bad, refused.output)
    too_many = await cli("runs", "list", "--limit", str(MAX_PAGE_SIZE + 1), env=env)
    assert too_many.exit_code == 2 and f"less than or equal to {MAX_PAGE_SIZE}" in too_many.output, too_many.output
    assert (await cli("runs", "list", "--limit", str(MAX_PAGE_SIZE), env=env)).exit_code == 0


def test_list_says_when_the_database_is_missing_or_not_migrated(db_url: str) -> None:
    result = CliRunner().invoke(app, ["runs", "list"], env={"AGENTSTREAM__DATABASE__URL": db_url})
    assert result.exit_code == 1
    if db_url.startswith("sqlite"):  # not created: nothing was created by looking
        assert "no database at" in result.output
        assert not Path(db_url.split("///", 1)[1]).exists()
    else:  # created but empty
        assert "agentstream db upgrade" in result.output


def on_runs(records: list[RawRecord]) -> list[tuple[str | None, Any]]:
    return [(r.key.decode() if r.key else None, RunCommandAdapter.validate_json(r.value or b"")) for r in records]


async def test_resume_no_wait_produces_resume_run_keyed_by_conversation(settings_factory, topics_created) -> None:
    settings = settings_factory()
    await store(
        settings.database.url,
        rows("run-done-1", KEY_A, "completed", T0),
        rows("run-stop-3", KEY_B, "interrupted", T0, reason="user", steps=1),
    )
    env = cli_env(settings)
    runs_topic = Topics(settings.kafka.topic_prefix).runs

    completed = await cli("runs", "resume", "run-done-1", "--no-wait", env=env)
    assert completed.exit_code == 1
    assert "run run-done-1 has no checkpoint" in completed.output
    assert "only failed or interrupted runs can be resumed" in completed.output
    unknown = await cli("runs", "resume", "no-such-run", "--no-wait", env=env)
    assert unknown.exit_code == 1 and "unknown run no-such-run" in unknown.output

    result = await cli("runs", "resume", "run-stop-3", "--no-wait", env=env)
    assert result.exit_code == 0, result.output
    assert "resume requested: run run-stop-3" in result.output
    as_json = await cli("runs", "resume", "run-stop-3", "--no-wait", "--json", env=env)
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(without_logs(as_json.output))
    assert (document["run_id"], document["conversation_key"], document["waited"]) == ("run-stop-3", KEY_B, False)
    assert document["status"] is None and document["text"] == ""  # not followed
    records = await read_until(settings.kafka.bootstrap_servers, runs_topic, lambda rs: len(rs) >= 2, timeout=10)
    resumes = on_runs(records)  # the refusals produced nothing
    assert [key for key, _ in resumes] == [KEY_B, KEY_B]
    for _, command in resumes:
        assert (command.type, command.run_id, command.conversation_key) == ("run.resume", "run-stop-3", KEY_B)


def finished(records: list[RawRecord], run_id: str) -> list[RunFinished]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if b'"run.finished"' in (r.value or b"")]
    return [e for e in events if isinstance(e, RunFinished) and e.root_run_id == run_id]


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")


def without_logs(output: str) -> str:
    """The CLI's output without the log lines of the services running in this process meanwhile
    (CliRunner captures the whole process's stdout)."""
    return "\n".join(line for line in output.splitlines() if not LOG_LINE.match(line))


async def wait_for_checkpoint(env: dict[str, str], run_id: str, present: bool) -> dict[str, Any]:
    async with asyncio.timeout(15):
        while True:
            result = await cli("runs", "show", run_id, "--json", env=env)
            if result.exit_code == 0:
                detail: dict[str, Any] = json.loads(without_logs(result.output))
                if (detail["checkpoint"] is not None) == present:
                    return detail
            await asyncio.sleep(0.2)


async def test_resume_follows_an_interrupted_run_to_completion(settings_factory, topics_created) -> None:
    """The run is interrupted after its tool step; `runs resume` continues it without repeating it."""
    key, run_id = "web:runs-e2e", "run-cli-resume-1"
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text="The answer is forty two and here is a long explanation of it", token_delay_s=0.15)
        fake.add_turn(text="It is 42.")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            runner={"coalesce_ms": 10},
        )
        services = [runner_bootstrap(settings), bootstrap_tool_executor(settings), bootstrap_persistence(settings)]
        bootstrap, topics = settings.kafka.bootstrap_servers, Topics(settings.kafka.topic_prefix)
        env = cli_env(settings)
        start = StartRun(
            run_id=run_id,
            conversation_key=key,
            assistant_id="default",
            user=User(id="u1"),
            text="what is 6*7?",
            reply_target=ReplyTarget(platform="web", chat_id="runs-e2e"),
        )
        async with ServiceHost(services, "127.0.0.1", {s.name: free_port() for s in services}):
            await produce_raw(bootstrap, topics.runs, start.to_json(), key=key.encode())
            await read_until(
                bootstrap, topics.events, lambda rs: any(b'"message.delta"' in (r.value or b"") for r in rs), timeout=30
            )
            await produce_raw(bootstrap, topics.runs, InterruptRun(conversation_key=key).to_json(), key=key.encode())
            await read_until(bootstrap, topics.events, lambda rs: len(finished(rs, run_id)) == 1)
            before = await wait_for_checkpoint(env, run_id, present=True)
            assert before["run"]["status"] == "interrupted"
            assert [s["step_type"] for s in before["checkpoint"]["steps"]] == ["llm", "tool"]

            listed = json.loads(without_logs((await cli("runs", "list", "--resumable", "--json", env=env)).output))
            assert [r["run_id"] for r in listed["items"]] == [run_id] and listed["next_cursor"] is None

            # The real entry point, as from a terminal: a process of its own.
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agentstream_stack",
                "runs",
                "resume",
                run_id,
                "--timeout",
                "30",
                env={**os.environ, **env},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output = (await asyncio.wait_for(proc.communicate(), 45))[0].decode()
            assert proc.returncode == 0, output
            assert f"resume requested: run {run_id}" in output
            assert "It is 42." in output and f"run {run_id} resumed: completed" in output
            assert fake.request_count == 3  # the LLM step and the tool step were not repeated
            assert fake.requests[2].messages == fake.requests[1].messages

            after = await wait_for_checkpoint(env, run_id, present=False)  # deleted after the success
            assert (after["run"]["status"], after["run"]["text"]) == ("completed", "It is 42.")
            again = await cli("runs", "resume", run_id, "--no-wait", env=env)
            assert again.exit_code == 1 and "has no checkpoint" in again.output
