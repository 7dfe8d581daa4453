"""delivery's hooks on the real broker (secrets redacted, a raising transform, billing, audit, webhook, relay mirror).

One service, one run: a fake API key streamed in pieces never reaches the platform (nor the
relay mirror), in previews or final; a raising observer, a raising transform and an observer
that sleeps for every event change neither the text nor the timing of the stream; billing
writes one usage row per run (a replay adds none); audit logs the lifecycle; the webhook
receiver gets signed POSTs.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import io
import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from rich.console import Console
from sqlalchemy import select

from agentstream.config import Settings
from agentstream.contracts import (
    EventBase,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunQueued,
    RunStarted,
    StepCompleted,
    Usage,
)
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_delivery import AuditLog
from agentstream.db.models_delivery import Usage as UsageRow
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap

pytestmark = pytest.mark.integration

CHAT, MIRROR = "chat-h", "mirror-h"
KEY = f"memory:{CHAT}"
TARGET = ReplyTarget(platform="memory", chat_id=CHAT)
API_KEY = "sk-proj-" + "Qm4Xz8Lp2Rt6Wv9Yb3Nc7Kd5"
ANSWER = f"Your key is {API_KEY} and it should never be shown. Rotate it now, please."
SHOWN = "Your key is [REDACTED] and it should never be shown. Rotate it now, please."
SECRET_ENV = "AS_TEST_HOOK_WEBHOOK_SECRET"

HOOKS = """
import asyncio

SEEN = []
SLOW_CALLS = []
RELEASE = asyncio.Event()  # the test sets it at the end: until then the slow observer is stuck

def broken_observer(event):
    raise RuntimeError("observer bug")

async def slow_observer(event):
    SLOW_CALLS.append(event.point)
    await RELEASE.wait()

def recorder(event):
    SEEN.append(event.point)

def broken_transform(text, ctx):
    raise RuntimeError("transform bug")
broken_transform.hook_transform = True

def register(registry):
    registry.add_observer(broken_observer, name="broken")
    registry.add_observer(slow_observer, name="slow")
    registry.add_observer(recorder, name="recorder")
    registry.add_transform(broken_transform, name="broken-transform")
"""


class Receiver(BaseHTTPRequestHandler):
    posts: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers["content-length"]))
        Receiver.posts.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook_url() -> Iterator[str]:
    Receiver.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/board"
    server.shutdown()


@pytest.fixture
def hook_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"delivery_test_hooks_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(HOOKS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def ids(seq: int) -> dict[str, object]:
    return {"run_id": "run-h", "root_run_id": "run-h", "conversation_key": KEY, "seq": seq}


def run_events() -> tuple[list[EventBase], RunFinished]:
    seq = iter(range(1, 1000))
    events: list[EventBase] = [
        RunQueued(**ids(0), assistant_id="helper", reply_target=TARGET, text="what is my key?", user_id="u1"),
        RunStarted(
            **ids(next(seq)),
            assistant_id="helper",
            connector_id="demo",
            reply_target=TARGET,
            user_id="u1",
            tenant_id="acme",
            session_id="s1",
        ),
        StepCompleted(**ids(next(seq)), step_id="st1", step_type="llm"),
        MessageStarted(**ids(next(seq)), message_id="m1"),
    ]
    # 4-character deltas: the key arrives in six pieces, across several preview frames
    events += [
        MessageDelta(**ids(next(seq)), message_id="m1", text=ANSWER[i : i + 4]) for i in range(0, len(ANSWER), 4)
    ]
    events.append(MessageCompleted(**ids(next(seq)), message_id="m1", text=ANSWER))
    finished = RunFinished(
        **ids(next(seq)),
        status="completed",
        text=ANSWER,
        duration_ms=1234.0,
        usage=Usage(prompt_tokens=11, completion_tokens=22, llm_calls=1),
    )
    return events, finished


@asynccontextmanager
async def producer_for(settings: Settings) -> AsyncIterator[Callable[..., Awaitable[None]]]:
    """One producer for the whole test: a producer's start must not count as stream latency."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
    await producer.start()

    async def publish(records: list[EventBase], pause: float = 0.0) -> None:
        for record in records:
            await producer.send_and_wait(f"{settings.kafka.topic_prefix}events", record.to_json(), key=KEY.encode())
            await asyncio.sleep(pause)

    try:
        yield publish
    finally:
        await producer.stop()


async def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


AUDITED = {"session:start", "agent:start", "agent:step", "agent:end", "delivery:sent", "command:new", "session:reset"}


async def rows(db_url: str) -> tuple[list[UsageRow], list[AuditLog]]:
    engine = create_engine(db_url)
    try:
        async with session_factory(engine)() as session:
            usage = list((await session.scalars(select(UsageRow))).all())
            audit = list((await session.scalars(select(AuditLog).order_by(AuditLog.id))).all())
    finally:
        await engine.dispose()
    return usage, audit


async def audited(db_url: str) -> set[str]:
    return {a.point for a in (await rows(db_url))[1]}


async def wait_until_async(probe: Callable[[], Awaitable[set[str]]], want: set[str], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not want <= await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"missing: {want - await probe()}")
        await asyncio.sleep(0.1)


async def test_hooks_redact_observe_bill_and_never_slow_the_stream(
    settings_factory: Callable[..., Settings],
    topics_created: str,
    db_url: str,
    webhook_url: str,
    hook_module: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, "board-signing-key")
    await upgrade(db_url)
    settings = settings_factory(
        db_url=db_url,
        hooks={
            "modules": [hook_module],
            "observer_timeout_s": 60,
            "billing": {"enabled": True},
            "audit": {"enabled": True},
            "webhooks": [{"url": webhook_url, "points": ["agent:*"], "secret_env": SECRET_ENV}],
        },
        relay=[{"match": {"platform": "memory", "chat_id": CHAT}, "to": {"platform": "memory", "chat_id": MIRROR}}],
    )
    svc = bootstrap(settings, console=Console(file=io.StringIO()))
    hooks_mod = sys.modules[hook_module]
    events, finished = run_events()
    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}), producer_for(settings) as publish:
        # Half the answer first, shown in both chats before the rest is sent: streamed in previews
        # whatever the load (read in one poll, the whole answer went out as one final frame).
        half = len(events) - (len(events) - 4) // 2
        await publish(events[:half], pause=0.01)
        for chat in (CHAT, MIRROR):
            await svc.memory.wait_for(chat, lambda ms: len(ms) >= 1, timeout=30)
        await publish(events[half:], pause=0.01)
        await publish([finished])
        await svc.memory.wait_for_final(CHAT, 1, timeout=30)
        await svc.memory.wait_for_final(MIRROR, 1, timeout=30)
        stuck_on = list(hooks_mod.SLOW_CALLS)

        # The key never reached the platform, in any frame of the chat or its mirror
        for chat in (CHAT, MIRROR):
            (msg,) = svc.memory.messages(chat)
            assert msg.text == SHOWN
            assert msg.edits >= 1  # it was streamed (previews), not only sent at the end
            for frame in msg.history:
                assert API_KEY[8:14] not in frame and "Qm4X" not in frame, frame
        # A raising transform passed the text through (SHOWN above is the plain answer,
        # redacted); the whole stream, final included, went out while the slow observer was still stuck
        # on its very first event and another observer raised on every one
        # (the slow observer is released only below: had the stream waited for it, no final would have
        # arrived within wait_for_final's 30 s; no wall-clock bound, which a loaded machine could break)
        assert stuck_on == ["session:start"]
        hooks_mod.RELEASE.set()

        notice = Notice(
            run_id="n1",
            root_run_id="n1",
            conversation_key=KEY,
            seq=0,
            text="Started a new session.",
            reply_target=TARGET,
            command="new",
        )
        await publish([notice, finished])  # the replayed run.finished must not bill twice
        await wait_until(
            lambda: (
                "session:reset" in hooks_mod.SEEN
                and hooks_mod.SEEN.count("agent:end") == 2
                and "delivery:sent" in hooks_mod.SEEN
            )
        )
        await wait_until(lambda: len(Receiver.posts) >= 3)
        await wait_until_async(lambda: audited(db_url), AUDITED)  # the durable observers caught up too
        metrics = svc.hooks.metrics

    run_points = [p for p in hooks_mod.SEEN if p != "delivery:sent"]  # receipts interleave with the run
    assert run_points[:4] == ["session:start", "agent:start", "agent:step", "agent:end"]
    assert "delivery:sent" in hooks_mod.SEEN  # from the ledger's receipts on `deliveries`
    assert metrics.calls.labels("broken", "observer", "error")._value.get() >= 6
    assert metrics.calls.labels("broken-transform", "transform", "error")._value.get() >= 2

    usage, audit = await rows(db_url)
    assert [
        (
            u.root_run_id,
            u.tenant_id,
            u.user_id,
            u.assistant_id,
            u.prompt_tokens,
            u.completion_tokens,
            u.llm_calls,
            u.status,
        )
        for u in usage
    ] == [("run-h", "acme", "u1", "helper", 11, 22, 1, "completed")]
    points = [a.point for a in audit]
    assert points.count("agent:end") == 1  # the replay added nothing
    assert set(points) >= AUDITED

    webhook_points = []
    for headers, body in Receiver.posts:
        expected = "sha256=" + hmac.new(b"board-signing-key", body, hashlib.sha256).hexdigest()
        assert headers["X-Agentstream-Signature"] == expected
        webhook_points.append(json.loads(body)["point"])
    assert webhook_points[:3] == ["agent:start", "agent:step", "agent:end"]
