"""The distributed layout (docs/deploy.md): the five services as five `agentstream serve` processes plus the broker."""

from __future__ import annotations

import asyncio

import httpx

from agentstream.config import SERVICES
from agentstream.kafka import create_topics, free_port
from agentstream_stack.run_follower import send_and_follow
from agentstream_testing.fixtures import ADMIN_HEADERS, kafka_env, make_test_settings
from tests.e2e.conftest import DEMO_ANSWER, inbound, poll_json
from tests.e2e.processes import spawn, stop


async def test_five_processes_answer_and_persist(kafka_bootstrap, topic_prefix, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'procs.db'}"
    settings = make_test_settings(kafka_bootstrap, topic_prefix, db)
    await create_topics(settings.kafka)
    env = {**kafka_env(settings), "AGENTSTREAM__DATABASE__URL": db}
    ports = {name: free_port() for name in SERVICES}
    procs = {
        name: spawn(["serve", name, "--port", str(ports[name])], env, tmp_path, tmp_path / f"{name}.log")
        for name in SERVICES
    }
    try:
        async with httpx.AsyncClient(headers=ADMIN_HEADERS, timeout=5) as http, asyncio.timeout(90):
            for name, port in ports.items():
                while True:
                    assert procs[name].poll() is None, (tmp_path / f"{name}.log").read_text()
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.2)
        msg = inbound()
        events = await send_and_follow(settings.kafka, msg, timeout=60)
        assert events[-1].type == "run.finished" and events[-1].text == DEMO_ANSWER
        chat = await poll_json(
            f"http://127.0.0.1:{ports['delivery']}/v1/memory/chats/{msg.chat_id}",
            lambda j: any(m["text"] == DEMO_ANSWER for m in j["messages"]),
        )
        assert [m["text"] for m in chat["messages"]].count(DEMO_ANSWER) == 1
        run = await poll_json(
            f"http://127.0.0.1:{ports['persistence']}/v1/runs/{events[-1].root_run_id}", lambda j: True
        )
        assert run["status"] == "completed" and run["llm_calls"] == 2
    finally:
        codes = {name: stop(p) for name, p in procs.items()}
    assert all(code == 0 for code in codes.values()), codes
