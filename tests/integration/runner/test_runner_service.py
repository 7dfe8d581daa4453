"""agent-runner + tool-executor on the real broker: one calculation, end to end."""

from agentstream.contracts import (
    DeadLetter,
    MessageCompleted,
    ReplyTarget,
    RunEventAdapter,
    RunFinished,
    StartRun,
    ToolResult,
    User,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.kafka import produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor


async def test_calculation_streams_through_runner_and_tool_executor(settings_factory, topics_created):
    settings = settings_factory()
    runner, tools = runner_bootstrap(settings), bootstrap_tool_executor(settings)
    bootstrap, t = settings.kafka.bootstrap_servers, runner.topics
    key = "web:c1"
    start = StartRun(
        run_id="run-int-1",
        conversation_key=key,
        assistant_id="default",
        user=User(id="u1"),
        text="calculate 6*7",
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )

    async with ServiceHost([runner, tools], "127.0.0.1", {runner.name: free_port(), tools.name: free_port()}):
        await produce_raw(bootstrap, t.runs, b"{not json", key=key.encode())
        await produce_raw(bootstrap, t.runs, start.to_json(), key=key.encode())
        records = await read_until(bootstrap, t.events, lambda rs: any(b'"run.finished"' in r.value for r in rs))
        dlq = await read_until(bootstrap, t.dlq, lambda rs: len(rs) >= 1)

    assert all(r.key == key.encode() for r in records)
    events = [RunEventAdapter.validate_json(r.value) for r in records]
    assert all(e.run_id == start.run_id for e in events)
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1  # strictly increasing, in topic order

    types = [e.type for e in events]
    milestones = ["run.started", "tool.call", "tool.result", "segment.break", "message.completed", "run.finished"]
    positions = [types.index(m) for m in milestones]
    assert positions == sorted(positions), types
    assert types.count("run.finished") == 1 and types[-1] == "run.finished"

    result = next(e for e in events if isinstance(e, ToolResult))
    assert (result.tool, result.ok, result.content) == ("calculator", True, "42")
    assert next(e for e in events if isinstance(e, MessageCompleted)).text == "6*7 = 42"
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.text, finished.usage.llm_calls) == ("completed", "6*7 = 42", 2)

    [letter] = [DeadLetter.model_validate_json(r.value) for r in dlq]
    assert (letter.service, letter.source_topic, letter.raw_value) == ("agent-runner", t.runs, "{not json")
    assert letter.error.startswith("not valid JSON")
