"""Interrupt and resume through the real broker: `/stop` closes the model's stream, resume without paying again
(docs/architecture.md, "Invariants and how each is kept").

agent-runner, tool-executor and persistence in one host; the LLM is the fake
OpenAI-compatible server. Turn 1 calls a tool, turn 2 streams slowly and is
interrupted, a ResumeRun continues from the checkpoint (after the tool step). Then a
ResetConversation: the next run's model request carries no history.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from agentstream.contracts import (
    InterruptRun,
    ReplyTarget,
    ResetConversation,
    ResumeRun,
    RunEventAdapter,
    RunFinished,
    StartRun,
    User,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fixtures import ADMIN_HEADERS
from agentstream_testing.kafka import RawRecord, produce_raw, read_until
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

pytestmark = pytest.mark.integration

KEY = "web:resume-1"
SLOW_TEXT = "The answer is forty two and I will now explain at length why that is so"


def finished(records: list[RawRecord], run_id: str) -> list[RunFinished]:
    events = [RunEventAdapter.validate_json(r.value) for r in records if b'"run.finished"' in (r.value or b"")]
    return [e for e in events if isinstance(e, RunFinished) and e.root_run_id == run_id]


def has_delta(records: list[RawRecord]) -> bool:
    return any(b'"message.delta"' in (r.value or b"") for r in records)


async def poll(http: httpx.AsyncClient, path: str, ready, timeout: float = 20.0):
    async with asyncio.timeout(timeout):
        while True:
            resp = await http.get(path)
            if ready(resp):
                return resp
            await asyncio.sleep(0.1)


async def test_interrupt_saves_a_checkpoint_and_resume_continues_without_repeating(settings_factory, topics_created):
    async with FakeOpenAI() as fake:
        fake.add_turn(tool_calls=[("calculator", {"expression": "6*7"})])
        fake.add_turn(text=SLOW_TEXT, token_delay_s=0.15)
        fake.add_turn(text="It is 42.")
        settings = settings_factory(
            connectors=[{"id": "fake", "type": "openai", "base_url": fake.base_url, "model": "fake-model"}],
            default_connector="fake",
            runner={"coalesce_ms": 10},
        )
        runner, tools, persistence = (
            runner_bootstrap(settings),
            bootstrap_tool_executor(settings),
            bootstrap_persistence(settings),
        )
        bootstrap, t = settings.kafka.bootstrap_servers, runner.topics
        start = StartRun(
            run_id="run-ir-1",
            conversation_key=KEY,
            assistant_id="default",
            user=User(id="u1"),
            text="what is 6*7?",
            reply_target=ReplyTarget(platform="web", chat_id="resume-1"),
        )
        ports = {s.name: free_port() for s in (runner, tools, persistence)}
        async with (
            ServiceHost([runner, tools, persistence], "127.0.0.1", ports) as host,
            httpx.AsyncClient(headers=ADMIN_HEADERS, base_url=host.url(persistence.name), timeout=5) as http,
        ):
            await produce_raw(bootstrap, t.runs, start.to_json(), key=KEY.encode())
            await read_until(bootstrap, t.events, has_delta, timeout=30)
            await asyncio.sleep(0.3)  # a few slow tokens out
            interrupted_at = time.monotonic()
            await produce_raw(bootstrap, t.runs, InterruptRun(conversation_key=KEY).to_json(), key=KEY.encode())
            records = await read_until(bootstrap, t.events, lambda rs: len(finished(rs, start.run_id)) == 1)

            # An interrupt closes the model's connection before its slow stream ends (the server
            # saw the close); how soon is a latency, judged in bench/, not here.
            slow = fake.requests[1]
            assert slow.closed_early and slow.closed_at is not None and slow.closed_at > interrupted_at
            [end] = finished(records, start.run_id)
            assert (end.status, end.reason) == ("interrupted", "user")

            run = (await poll(http, f"/v1/runs/{start.run_id}", lambda r: r.status_code == 200)).json()
            assert run["status"] == "interrupted"
            messages = (await http.get(f"/v1/conversations/{KEY}/messages")).json()["items"]
            partial = [m["content"] for m in messages if m["role"] == "assistant"]
            assert len(partial) == 1 and SLOW_TEXT.startswith(partial[0]) and 0 < len(partial[0]) < len(SLOW_TEXT)
            checkpoint = (
                await poll(http, f"/v1/runs/{start.run_id}/resume-steps", lambda r: r.status_code == 200)
            ).json()
            assert [s["step_type"] for s in checkpoint["steps"]] == ["llm", "tool"]
            assert checkpoint["usage"]["llm_calls"] == 1 and checkpoint["last_seq"] == end.seq

            # The resume continues after the tool step; nothing completed is requested again (nothing billed twice).
            await produce_raw(
                bootstrap, t.runs, ResumeRun(conversation_key=KEY, run_id=start.run_id).to_json(), key=KEY.encode()
            )
            records = await read_until(bootstrap, t.events, lambda rs: len(finished(rs, start.run_id)) == 2)
            done = finished(records, start.run_id)[1]
            assert (done.status, done.text) == ("completed", "It is 42.")
            assert done.seq > end.seq and done.usage.llm_calls == 2  # the carried-over call + the new one
            assert fake.request_count == 3
            assert fake.requests[2].messages == fake.requests[1].messages  # same memory, the tool not re-run
            await poll(http, f"/v1/runs/{start.run_id}/resume-steps", lambda r: r.status_code == 404)
            run = (await http.get(f"/v1/runs/{start.run_id}")).json()
            assert (run["status"], run["text"]) == ("completed", "It is 42.")
            messages = (await http.get(f"/v1/conversations/{KEY}/messages")).json()["items"]
            assert [m["role"] for m in messages] == ["user", "tool", "assistant", "assistant"]
            assert messages[-1]["content"] == "It is 42."

            # Before a reset the next run sees the history; after it, none.
            async def ask(run_id: str, text: str) -> list[dict[str, object]]:
                s = start.model_copy(update={"run_id": run_id, "text": text})
                await produce_raw(bootstrap, t.runs, s.to_json(), key=KEY.encode())
                await read_until(bootstrap, t.events, lambda rs: len(finished(rs, run_id)) == 1)
                await poll(http, f"/v1/runs/{run_id}", lambda r: r.status_code == 200)
                return fake.requests[-1].messages

            seen = await ask("run-ir-2", "and now?")
            assert [m["content"] for m in seen if m["role"] == "user"] == ["what is 6*7?", "and now?"]
            await produce_raw(bootstrap, t.runs, ResetConversation(conversation_key=KEY).to_json(), key=KEY.encode())
            seen = await ask("run-ir-3", "fresh start")
            assert [m["role"] for m in seen if m["role"] != "system"] == ["user"]
            assert seen[-1]["content"] == "fresh start"

            # Every run is flushed: persistence committed its events partitions up to their end.
            # The end is read off the records (run-ir-3's run.finished is the last event): Tansu's
            # ListOffsets answers the last *batch's* base offset + 1, short of the end when the
            # producer batched several records.
            records = await read_until(bootstrap, t.events, lambda rs: len(finished(rs, "run-ir-3")) == 1)
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap, group_id=persistence.runtime.group_id, enable_auto_commit=False
            )
            await consumer.start()
            try:
                tps = [TopicPartition(t.events, p) for p in range(settings.kafka.partitions)]
                ends = {
                    tp: max((r.offset + 1 for r in records if r.partition == tp.partition), default=0) for tp in tps
                }
                for _ in range(50):  # the commit follows the last flush, or the next watchdog tick
                    committed = [await consumer.committed(tp) or 0 for tp in tps]
                    if committed == [ends[tp] for tp in tps]:
                        break
                    await asyncio.sleep(0.2)
                assert committed == [ends[tp] for tp in tps]
            finally:
                await consumer.stop()
