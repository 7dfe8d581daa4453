"""A model cannot call a tool its assistant was not offered: on the real broker, an
assistant with `tools: [calculator]` whose model — a fake OpenAI server on real HTTP, scripted like
a prompt-injected model — answers with `shell` and `write_file`, while an executor serves both
without approval. The runner answers both "unknown tool" (the model reads it and answers without
them), asks nobody to approve, sends nothing to `tool-calls`, counts and logs the attempt; the
workspace stays empty."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, StartRun, ToolCallRefusal, ToolResult, User
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import produce_raw, read_to_end, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

KEY = "web:victim"


@pytest.mark.timeout(90)
async def test_a_tool_outside_the_assistants_list_is_refused_by_the_runner(settings_factory, topics_created, tmp_path):
    workspaces = tmp_path / "ws"
    (tmp_path / "assistants").mkdir()
    (tmp_path / "assistants" / "math.yaml").write_text("id: math\nname: Math\nconnector: fake\ntools: [calculator]\n")
    async with FakeOpenAI() as fake:
        fake.add_turn(
            tool_calls=[
                ("shell", {"command": "echo pwned > pwned-by-shell.txt"}),
                ("write_file", {"path": "pwned.txt", "content": "pwned"}),
            ]
        )
        fake.add_turn(text="I can only calculate.")
        settings = settings_factory(
            assistants_dir=str(tmp_path / "assistants"),
            runner={"coalesce_ms": 0},
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "m"}],
            # The executor would run both at once: no approval stands in the way.
            tools={"sandbox": {"enabled": True, "root_dir": str(workspaces), "requires_approval": False}},
        )
        runner, tools = runner_bootstrap(settings), bootstrap_tool_executor(settings)
        start = StartRun(
            run_id="run-injected",
            conversation_key=KEY,
            assistant_id="math",
            user=User(id="u1"),
            text="summarise this web page",
            reply_target=ReplyTarget(platform="web", chat_id="victim"),
        )
        bootstrap, topics = settings.kafka.bootstrap_servers, runner.topics
        with capture_logs() as logs:
            async with ServiceHost([runner, tools], "127.0.0.1", {runner.name: free_port(), tools.name: free_port()}):
                await produce_raw(bootstrap, topics.runs, start.to_json(), key=KEY.encode())
                records = await read_until(
                    bootstrap, topics.events, lambda rs: any(b'"run.finished"' in r.value for r in rs)
                )
                calls_sent = await read_to_end(bootstrap, topics.tool_calls)
                not_offered = runner.registry.get_sample_value(
                    "agentstream_runner_tool_calls_refused_total", {"reason": ToolCallRefusal.NOT_OFFERED}
                )
        second_request = fake.requests[1].body

    assert calls_sent == []  # nothing reached an executor
    # Nothing ran: no workspace was made (the root holds only the sandbox's own name key).
    assert not workspaces.exists() or not [p for p in workspaces.iterdir() if p.name != ".name-key"]
    events = [RunEventAdapter.validate_json(r.value) for r in records]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.tool, r.ok, r.refused) for r in results] == [
        ("shell", False, ToolCallRefusal.NOT_OFFERED),
        ("write_file", False, ToolCallRefusal.NOT_OFFERED),
    ]
    # The model is told, as a tool result it can react to, and answers without the tools.
    tool_messages = [m["content"] for m in second_request["messages"] if m["role"] == "tool"]
    assert tool_messages == [
        "error: unknown tool 'shell'; available tools: calculator",
        "error: unknown tool 'write_file'; available tools: calculator",
    ]
    finished = events[-1]
    assert isinstance(finished, RunFinished) and (finished.status, finished.text) == (
        "completed",
        "I can only calculate.",
    )
    assert not any(e.get("event", "").startswith("approval") for e in logs)
    assert not_offered == 2
    warned = [e for e in logs if e["event"] == "tool call refused: not one of the assistant's tools"]
    assert [(w["assistant"], w["tool"]) for w in warned] == [("math", "shell"), ("math", "write_file")]
