"""agent-runner + tool-executor on the real broker, the model a fake OpenAI server on
real HTTP: a YAML assistant routed by a user's role override, with history from the
runner's own database, a retried tool call and usage over every model call."""

from __future__ import annotations

from datetime import UTC, datetime

from agentstream.contracts import ReplyTarget, RunEventAdapter, RunFinished, RunStarted, StartRun, ToolCall, User
from agentstream.db import Message, create_engine, session_factory, upgrade
from agentstream.db.models_runner import RoleSetting
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.kafka import produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

T0 = datetime(2026, 1, 1, tzinfo=UTC)
KEY = "web:c1"


async def seed(db_url: str) -> None:
    await upgrade(db_url)
    engine = create_engine(db_url)
    async with session_factory(engine)() as s, s.begin():
        s.add(RoleSetting(scope="user", subject_id="u1", role="math", connector_id="fake", updated_at=T0))
        s.add(
            Message(
                conversation_key=KEY,
                session_id="s1",
                root_run_id="old",
                run_id="old",
                seq=3,
                part=0,
                role="user",
                content="earlier question",
                created_at=T0,
            )
        )
    await engine.dispose()


async def test_yaml_assistant_with_role_override_history_and_tool_retry(settings_factory, topics_created, tmp_path):
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'runner.db'}"
    await seed(db_url)
    (tmp_path / "assistants").mkdir()
    (tmp_path / "assistants" / "math.yaml").write_text(
        "id: math\nname: Math\nconnector: use::math\nsystem: 'You help $CTX.user.'\ntools: [calculator]\n"
    )
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expr": "6*7"})], usage=(10, 2))
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})], usage=(20, 2))
        fake.add_turn(text="It is 42.", usage=(30, 3))
        settings = settings_factory(
            db_url=db_url,
            assistants_dir=str(tmp_path / "assistants"),
            runner={"coalesce_ms": 0},
            connectors=[
                {"id": "demo", "type": "scripted"},
                {"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "m"},
            ],
        )
        runner, tools = runner_bootstrap(settings), bootstrap_tool_executor(settings)
        start = StartRun(
            run_id="run-oai-1",
            conversation_key=KEY,
            assistant_id="math",
            session_id="s1",
            user=User(id="u1", name="Ann"),
            text="6*7?",
            reply_target=ReplyTarget(platform="web", chat_id="c1"),
        )
        bootstrap = settings.kafka.bootstrap_servers
        async with ServiceHost([runner, tools], "127.0.0.1", {runner.name: free_port(), tools.name: free_port()}):
            await produce_raw(bootstrap, runner.topics.runs, start.to_json(), key=KEY.encode())
            records = await read_until(
                bootstrap, runner.topics.events, lambda rs: any(b'"run.finished"' in r.value for r in rs)
            )
        first_request = fake.requests[0].body

    events = [RunEventAdapter.validate_json(r.value) for r in records]
    started = next(e for e in events if isinstance(e, RunStarted))
    assert (started.assistant_id, started.connector_id) == ("math", "fake")
    assert [(m["role"], m["content"]) for m in first_request["messages"]] == [
        ("system", "You help Ann."),
        ("user", "earlier question"),
        ("user", "6*7?"),
    ]
    assert [t["function"]["name"] for t in first_request["tools"]] == ["calculator"]
    assert [c.attempt for c in events if isinstance(c, ToolCall)] == [1, 2]
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert (finished.status, finished.text) == ("completed", "It is 42.")
    assert (finished.usage.prompt_tokens, finished.usage.completion_tokens, finished.usage.llm_calls) == (60, 7, 3)
