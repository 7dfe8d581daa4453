"""The embedded stack in one process on the real broker: a message answered, streamed and stored; raw Kafka
producers; dead letters; the ops endpoints; the web chat link; `agentstream send --json`."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
from aiokafka import AIOKafkaProducer
from sqlalchemy import select
from typer.testing import CliRunner

from agentstream.contracts import DeadLetter, RunFinished, ToolCall, ToolResult
from agentstream.db import Message, Run, create_engine, session_factory
from agentstream_delivery.adapters.web_endings import visible_text
from agentstream_stack.cli import app
from agentstream_stack.embedded import embedded_stack, free_ports
from agentstream_stack.run_follower import send_and_follow
from agentstream_testing.fixtures import ADMIN_HEADERS, kafka_env
from agentstream_testing.kafka import produce_raw, read_until
from tests.e2e.conftest import DEMO_ANSWER, inbound, poll_json


async def _db_rows(url: str, root_run_id: str) -> tuple[list[Run], list[Message]]:
    engine = create_engine(url)
    try:
        async with session_factory(engine)() as s:
            runs = list((await s.scalars(select(Run).where(Run.root_run_id == root_run_id))).all())
            msgs = list(
                (
                    await s.scalars(
                        select(Message).where(Message.root_run_id == root_run_id).order_by(Message.seq, Message.part)
                    )
                ).all()
            )
            return runs, msgs
    finally:
        await engine.dispose()


async def test_one_message_streams_reply_calls_tool_and_persists(settings_factory, db_url):
    settings = settings_factory(db_url=db_url)
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        msg = inbound()
        events = await send_and_follow(stack.settings.kafka, msg, timeout=60)
        finished = events[-1]
        assert isinstance(finished, RunFinished) and finished.status == "completed"
        assert finished.text == DEMO_ANSWER
        assert [e.tool for e in events if isinstance(e, ToolCall)] == ["calculator"]
        assert [e.content for e in events if isinstance(e, ToolResult)] == ["42"]

        # Delivery: what the person sees in the (in-memory) chat.
        chat = await poll_json(
            f"{stack.urls['delivery']}/v1/memory/chats/{msg.chat_id}",
            lambda j: any(m["text"] == DEMO_ANSWER for m in j["messages"]),
        )
        assert [m["text"] for m in chat["messages"]].count(DEMO_ANSWER) == 1

        # Persistence: the run and its messages, once.
        run = await poll_json(f"{stack.urls['persistence']}/v1/runs/{finished.root_run_id}", lambda j: True)
        assert run["status"] == "completed" and run["text"] == DEMO_ANSWER
    runs, msgs = await _db_rows(db_url, finished.root_run_id)
    assert len(runs) == 1 and runs[0].llm_calls == 2
    roles = [(m.role, m.content) for m in msgs]
    assert roles[0] == ("user", "calculate 6*7")
    assert roles[-1] == ("assistant", DEMO_ANSWER)
    assert any(r == "tool" and "42" in c for r, c in roles)


async def test_raw_json_from_plain_aiokafka_is_answered_and_persisted(settings_factory):
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        t = stack.services["ingress"].topics
        body = {
            "id": "raw-1",
            "platform": "memory",
            "chat_id": "raw-chat",
            "user": {"id": "u-9"},
            "text": "what is 2+3",
            "some_future_field": True,
        }
        # No project code on the producer side: plain aiokafka and a JSON literal.
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
        await producer.start()
        try:
            await producer.send_and_wait(t.inbound, json.dumps(body).encode(), key=b"memory:raw-chat")
        finally:
            await producer.stop()
        chat = await poll_json(
            f"{stack.urls['delivery']}/v1/memory/chats/raw-chat",
            lambda j: any(m["text"] == "2+3 = 5" for m in j["messages"]),
            timeout=60,
        )
        assert chat["messages"][-1]["text"] == "2+3 = 5"
        runs = (
            await poll_json(
                f"{stack.urls['persistence']}/v1/conversations/memory:raw-chat/runs", lambda j: len(j["items"]) == 1
            )
        )["items"]
        assert runs[0]["status"] == "completed" and runs[0]["text"] == "2+3 = 5"
        msgs = (
            await poll_json(
                f"{stack.urls['persistence']}/v1/conversations/memory:raw-chat/messages", lambda j: len(j["items"]) >= 2
            )
        )["items"]
        assert msgs[0]["role"] == "user" and msgs[0]["content"] == "what is 2+3"


async def test_malformed_records_dead_lettered_and_stack_keeps_answering(settings_factory):
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        t = stack.services["ingress"].topics
        bootstrap = settings.kafka.bootstrap_servers
        await produce_raw(bootstrap, t.inbound, b"{not json", key=b"memory:x")
        no_chat = {"id": "m1", "platform": "memory", "user": {"id": "u"}, "text": "hi"}
        await produce_raw(bootstrap, t.inbound, json.dumps(no_chat).encode(), key=b"memory:x")
        events = await send_and_follow(stack.settings.kafka, inbound(), timeout=60)
        assert isinstance(events[-1], RunFinished) and events[-1].text == DEMO_ANSWER
        dlq = await read_until(bootstrap, t.dlq, lambda rs: len(rs) >= 2)
    letters = [DeadLetter.model_validate_json(r.value) for r in dlq]
    assert len(letters) == 2
    assert "not valid JSON" in letters[0].error
    assert "chat_id: Field required" in letters[1].error


async def test_ops_endpoints_and_readyz_fails_without_broker(settings_factory):
    settings = settings_factory()
    async with (
        embedded_stack(settings, start_broker=True, ports=free_ports(), state_file=None) as stack,
        httpx.AsyncClient(headers=ADMIN_HEADERS, timeout=10) as http,
    ):
        for name, url in stack.urls.items():
            assert (await http.get(f"{url}/healthz")).json()["status"] == "ok", name
            ready = await http.get(f"{url}/readyz")
            assert ready.status_code == 200 and ready.json()["ready"] is True, (name, ready.text)
            metrics = await http.get(f"{url}/metrics")
            assert metrics.status_code == 200 and "# TYPE" in metrics.text, name
        assert stack.broker is not None
        stack.broker.stop()
        for name, url in stack.urls.items():
            ready = await http.get(f"{url}/readyz")
            assert ready.status_code == 503 and ready.json()["checks"]["broker"] is False, name
            assert (await http.get(f"{url}/healthz")).status_code == 200, name


def shown(frame: dict[str, object]) -> str:
    """What the page shows of a frame: delivery renders the web's answers to HTML."""
    text = str(frame["text"])
    return visible_text(text) if frame.get("markup") == "html" else text


async def test_the_web_link_chats_through_the_whole_stack(settings_factory):
    """The link `agentstream up` prints: its token opens the stream and posts; delivery's own key reaches ingress."""
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        link = re.fullmatch(r"(http://127\.0\.0\.1:\d+)/web/local#token=(\S+)", stack.web_link())
        assert link is not None
        base, token = link.groups()
        frames = []
        async with (
            httpx.AsyncClient(base_url=base, timeout=30) as http,
            http.stream("GET", "/v1/web/local/events", params={"token": token}) as events,
        ):
            assert events.status_code == 200
            posted = await http.post(
                "/v1/web/local/messages", headers={"Authorization": f"Bearer {token}"}, json={"text": "calculate 6*7"}
            )
            assert posted.status_code == 202, posted.text
            async with asyncio.timeout(60):
                async for line in events.aiter_lines():
                    if line.startswith("data: "):
                        frames.append(json.loads(line.removeprefix("data: ")))
                        if frames[-1]["final"] and shown(frames[-1]) == DEMO_ANSWER:
                            break
        runs = await poll_json(
            f"{stack.urls['persistence']}/v1/conversations/web:local/runs", lambda j: len(j["items"]) == 1
        )
        assert runs["items"][0]["status"] == "completed"
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:  # the page's history: delivery's own key
            history = await http.get("/v1/web/local/history", headers={"Authorization": f"Bearer {token}"})
        assert history.status_code == 200, history.text
        sides = [(item["role"], item["text"], item["markup"]) for item in history.json()["items"]]
        # the answer as the live view showed it: the final frame's very HTML
        assert sides[0] == ("user", "calculate 6*7", "plain") and ("assistant", frames[-1]["text"], "html") in sides
        assert frames[-1]["markup"] == "html" and visible_text(frames[-1]["text"]) == DEMO_ANSWER


async def test_send_json_prints_the_runs_outcome_as_one_document(settings_factory):
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        env = kafka_env(stack.settings)  # the test broker's flavor: Kafka's idempotent producer on Kafka
        args = ["send", "calculate 6*7", "--platform", "memory", "--chat", "json-chat", "--json"]
        result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 0, result.output
    # CliRunner captures the whole process's stdout: the services' log lines are not the document's.
    document, _ = json.JSONDecoder().raw_decode(result.output[result.output.index("{\n") :])
    assert document["conversation_key"] == "memory:json-chat" and document["message_id"]
    assert (document["status"], document["reason"], document["error"]) == ("completed", None, None)
    assert document["text"] == DEMO_ANSWER and document["run_id"]
    assert document["tools"] == [{"tool": "calculator", "ok": True, "error": None}]
    assert document["notices"] == [] and document["usage"]["llm_calls"] == 2
    assert document["duration_ms"] > 0


async def test_send_says_it_is_waiting_before_the_answer_streams(settings_factory):
    """The first event can take seconds: `send` says, once the message is on `inbound`, where it went (stderr), then the answer."""
    settings = settings_factory()
    async with embedded_stack(settings, start_broker=False, ports=free_ports(), state_file=None) as stack:
        kafka = stack.settings.kafka
        env = {
            "AGENTSTREAM__KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "AGENTSTREAM__KAFKA__TOPIC_PREFIX": kafka.topic_prefix,
            "AGENTSTREAM__KAFKA__IN_MEMORY": "true",
        }
        args = ["send", "calculate 6*7", "--platform", "memory", "--chat", "waiting-chat"]
        result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
    assert result.exit_code == 0, result.output
    assert "sent to memory:waiting-chat, waiting for the answer" in result.stderr
    # The in-process services log to the same stdout, between the streamed deltas: look for the end line.
    assert "run completed" in result.stdout and "← calculator: 42" in result.stdout, result.stdout[-3000:]
