"""One run followed across services by its id: the log lines of ingress, the runner, the
tool-executor, delivery and persistence handling one run carry the same run_id, root_run_id and
conversation key, and each its service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentstream.contracts import RunFinished
from agentstream.observability import configure_logging
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.run_follower import send_and_follow
from agentstream_testing.logs import logging_restored
from tests.e2e.conftest import DEMO_ANSWER, inbound, poll_json


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "stack.jsonl"
    with logging_restored():
        configure_logging("DEBUG", log_file=str(path))  # ingress says `run accepted` at debug
        yield path


async def test_one_runs_lines_carry_its_ids_in_every_service(settings_factory, log_file: Path):
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        msg = inbound()
        events = await send_and_follow(stack.settings.kafka, msg, timeout=60)
        finished = events[-1]
        assert isinstance(finished, RunFinished) and finished.text == DEMO_ANSWER
        await poll_json(
            f"{stack.urls['delivery']}/v1/memory/chats/{msg.chat_id}",
            lambda j: any(m["text"] == DEMO_ANSWER for m in j["messages"]),
        )
    text = log_file.read_text()  # noqa: ASYNC240 - a small file, read once the stack has stopped
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    run_lines = [line for line in lines if line.get("run_id") == finished.run_id]
    by_service = {line["service"] for line in run_lines}
    expected = {
        "ingress": "run accepted",
        "agent-runner": "run handled",
        "tool-executor": "tool call done",
        "delivery": "stream closed",
        "persistence": "run flushed",
    }
    assert set(expected) <= by_service, by_service
    for service, event in expected.items():
        assert event in {line["event"] for line in run_lines if line["service"] == service}, service
    for line in run_lines:
        assert line["root_run_id"] == finished.root_run_id, line
        assert line["conversation_key"] == finished.conversation_key, line
    # The conversation's only run: no line about it lacks the run (or names another).
    for line in lines:
        if line.get("conversation_key") == finished.conversation_key:
            assert line.get("run_id") == finished.run_id, line
    # Outside a record's handling nothing of the run is left bound: the stop lines carry no run.
    stopped = [line for line in lines if line["event"] == "service stopped"]
    assert stopped and not any("run_id" in line for line in stopped)
