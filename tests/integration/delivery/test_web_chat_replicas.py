"""The web chat as a person uses it, in headless Chromium, with two delivery replicas and persistence.

Two delivery services (replicas A and B: one consumer group on `events`, one session secret)
and persistence share the test broker and database. A stand-in ingress on 127.0.0.1 produces
the run a runner would for each posted message — a tool call, then a paced answer — and
answers `/stop` with the interrupted `run.finished` a stop produces. A page on replica A (desktop
width) and one on replica B (phone width) show the same chat: whichever replica delivers the run,
both pages stream it, because every replica serves its pages from `web-frames`. Then: the stop
button, `Last-Event-ID` resume on the other replica, a server-rendered HTML frame with a highlighted
code block, and a reload that shows both sides from persistence. Screenshots go to
`$AGENTSTREAM_TEST_ARTIFACTS` (default: the system temp dir), path printed.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from fastapi import FastAPI, Header, HTTPException
from rich.console import Console

from agentstream.config import Settings
from agentstream.contracts import (
    ChatMessage,
    InboundMessage,
    MessageCompleted,
    MessageDelta,
    MessageRole,
    MessageStarted,
    ReplyTarget,
    RunEvent,
    RunFinished,
    RunStarted,
    SegmentBreak,
    ToolCall,
    ToolResult,
    WebFrame,
    WebFrameOp,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap
from agentstream_delivery.adapters.web import FrameId
from agentstream_delivery.app import DeliveryService
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fixtures import ADMIN_HEADERS, ADMIN_TOKEN_ENV
from tests.integration.delivery.test_web_chromium import CHROMIUM_ARGS, chromium_path, playwright_or_skip, serve

pytestmark = pytest.mark.integration

CHAT = "chat-replicas"
TENANT = "acme"
GATEWAY_ENV = "AGENTSTREAM_TEST_REPLICAS_GATEWAY_KEY"
GATEWAY_KEY = "agsk_000000000000_stand-in-gateway-key-of-the-replicas-test-0"
SECRET_ENV = "AGENTSTREAM_TEST_REPLICAS_WEB_SECRET"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SLOW = "tell me a long story"
LOOKING = "Let me look that up."


def answer_to(text: str) -> str:
    return f"You said: {text}. Here is the answer, streamed word by word to both replicas' pages."


class StandInIngress:
    """Answers 202 and produces the run's events; `/stop` interrupts the conversation's run."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.received: list[InboundMessage] = []
        self.runs: dict[str, asyncio.Task[None]] = {}
        self.producer: AIOKafkaProducer | None = None

    async def produce(self, record: RunEvent) -> None:
        assert self.producer is not None
        topic = f"{self.settings.kafka.topic_prefix}events"
        await self.producer.send_and_wait(topic, record.to_json(), key=record.conversation_key.encode())

    async def run(self, msg: InboundMessage, ids: dict[str, str]) -> None:
        target = ReplyTarget(
            platform=msg.platform, chat_id=msg.chat_id, tenant_id=msg.user.tenant_id
        )  # as ingress does
        user = ChatMessage(role=MessageRole.USER, content=msg.text)
        answer = answer_to(msg.text) + (" And on, and on." * 40 if msg.text == SLOW else "")
        pace = 0.15 if msg.text == SLOW else 0.03
        await self.produce(
            RunStarted(
                **ids,
                seq=1,
                assistant_id="default",
                connector_id="demo",
                reply_target=target,
                user_id=msg.user.id,
                tenant_id=msg.user.tenant_id,
                input=[user],
            )
        )
        await self.produce(MessageStarted(**ids, seq=2, message_id="m0"))
        await self.produce(MessageDelta(**ids, seq=3, message_id="m0", text=LOOKING))
        await self.produce(MessageCompleted(**ids, seq=4, message_id="m0", text=LOOKING))
        await self.produce(SegmentBreak(**ids, seq=5))  # the model calls a tool: its text so far is sealed
        await self.produce(ToolCall(**ids, seq=6, call_id="c1", tool="search", arguments="{}"))
        await asyncio.sleep(0.4)  # the tool's work: the page shows the progress line meanwhile
        await self.produce(ToolResult(**ids, seq=7, call_id="c1", tool="search", ok=True, content="found"))
        await self.produce(MessageStarted(**ids, seq=8, message_id="m1"))
        for i, p in enumerate(range(0, len(answer), 8)):
            await self.produce(MessageDelta(**ids, seq=9 + i, message_id="m1", text=answer[p : p + 8]))
            await asyncio.sleep(pace)
        await self.produce(MessageCompleted(**ids, seq=1000, message_id="m1", text=answer))
        await self.produce(RunFinished(**ids, seq=1001, status="completed", text=answer))

    async def stop(self, key: str) -> None:
        for run_id, task in list(self.runs.items()):
            if task.done() or not run_id.startswith(f"{key}/"):
                continue
            task.cancel()
            ids = {"run_id": run_id, "root_run_id": run_id, "conversation_key": key}
            await self.produce(RunFinished(**ids, seq=5000, status="interrupted", reason="user"))

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/messages", status_code=202)
        async def post_message(msg: InboundMessage, authorization: str = Header()) -> dict[str, str]:
            if authorization != f"Bearer {GATEWAY_KEY}":
                raise HTTPException(401, "stand-in ingress: not delivery's key")
            self.received.append(msg)
            if msg.text == "/stop":
                await self.stop(msg.conversation_key)
            else:
                run_id = f"{msg.conversation_key}/run-{msg.id}"
                ids = {"run_id": run_id, "root_run_id": run_id, "conversation_key": msg.conversation_key}
                self.runs[run_id] = asyncio.create_task(self.run(msg, ids))
            return {"conversation_key": msg.conversation_key, "message_id": msg.id}

        return app


def artifacts_dir() -> Path:
    base = Path(os.environ.get("AGENTSTREAM_TEST_ARTIFACTS") or tempfile.gettempdir())
    path = base / "agentstream-web-chat"
    path.mkdir(parents=True, exist_ok=True)
    return path


def count_publishes(svc: DeliveryService, counts: dict[str, int], name: str) -> None:
    """Which replica's web adapter put frames on `web-frames` (the one that delivered the run)."""
    sink = svc.web.sink
    assert sink is not None

    async def counting(frame: WebFrame) -> None:
        counts[name] = counts.get(name, 0) + 1
        await sink(frame)

    svc.web.sink = counting


async def sse_frames(http: httpx.AsyncClient, url: str, token: str, last_id: str | None, count: int) -> list[Any]:
    """The first `count` frames of one SSE connection, as (id, data)."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    frames: list[tuple[str, dict[str, Any]]] = []
    async with http.stream("GET", url, params={"token": token}, headers=headers) as resp:
        buffer = ""
        async for chunk in resp.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                event, buffer = buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in event.split("\n") if not line.startswith(":"))
                if "data" in fields:
                    frames.append((fields["id"], json.loads(fields["data"])))
                if len(frames) == count:
                    return frames
    return frames


@pytest.mark.timeout(180)  # two replicas, persistence, a browser: a whole conversation on purpose
async def test_two_replicas_serve_one_chat_with_tools_stop_resume_and_history(
    settings_factory: Callable[..., Settings],
    topics_created: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executable = chromium_path()
    async_playwright = playwright_or_skip()
    monkeypatch.setenv(GATEWAY_ENV, GATEWAY_KEY)
    monkeypatch.setenv(SECRET_ENV, "a-session-secret-both-replicas-share-" + "x" * 16)
    ingress_port, persistence_port = free_port(), free_port()
    settings = settings_factory(
        platforms={
            "web": {
                "api_url": f"http://127.0.0.1:{ingress_port}",
                "api_key_env": GATEWAY_ENV,
                "history_url": f"http://127.0.0.1:{persistence_port}",
                "history_key_env": ADMIN_TOKEN_ENV,
            }
        },
        auth={"web": {"secret_env": SECRET_ENV}},
    )
    ingress = StandInIngress(settings)
    replica_a = bootstrap(settings, console=Console(file=io.StringIO()))
    replica_b = bootstrap(settings, console=Console(file=io.StringIO()))
    persistence = bootstrap_persistence(settings)
    published: dict[str, int] = {}
    count_publishes(replica_a, published, "A")
    count_publishes(replica_b, published, "B")
    out = artifacts_dir()
    ingress.producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
    await ingress.producer.start()
    try:
        async with (
            ServiceHost(
                [replica_a, persistence], "127.0.0.1", {"delivery": free_port(), "persistence": persistence_port}
            ) as host_a,
            ServiceHost([replica_b], "127.0.0.1", {"delivery": free_port()}) as host_b,
            serve(ingress.app(), ingress_port),
            async_playwright() as pw,
        ):
            url_a, url_b = host_a.url("delivery"), host_b.url("delivery")
            for replica in (replica_a, replica_b):
                assert replica.web_reader is not None
                await asyncio.wait_for(replica.web_reader.ready.wait(), 30)
            async with httpx.AsyncClient(base_url=url_a, headers=ADMIN_HEADERS) as http:
                issued = await http.post(
                    "/v1/web/sessions",
                    json={"chat_id": CHAT, "user_id": "alice", "user_name": "Alice", "tenant_id": TENANT},
                )
            assert issued.status_code == 201, issued.text
            link, token = issued.json()["url"], issued.json()["token"]
            browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            try:
                desktop = await (await browser.new_context(viewport=DESKTOP)).new_page()
                phone = await (await browser.new_context(viewport=PHONE, is_mobile=True)).new_page()
                await desktop.goto(url_a + link)  # replica A
                await phone.goto(url_b + link)  # replica B: the same session works on every replica
                for page in (desktop, phone):
                    await page.wait_for_function("document.getElementById('status').textContent === 'connected'")
                await desktop.evaluate("""() => {
                    window.seen = [];
                    new MutationObserver(() => {
                        document.querySelectorAll('.msg.bot').forEach(b => window.seen.push(b.className + '|' + b.textContent));
                    }).observe(document.getElementById('messages'), {childList: true, subtree: true, characterData: true});
                }""")

                # 1. streaming, with the tool progress line, on both replicas' pages
                await desktop.fill("#text", "hello from chromium")
                await desktop.click("#send")
                first = answer_to("hello from chromium")
                for page in (desktop, phone):
                    await page.wait_for_function(
                        "t => [...document.querySelectorAll('.msg.bot.final')].some(b => b.textContent === t)",
                        arg=first,
                        timeout=30_000,
                    )
                seen = await desktop.evaluate("window.seen")
                tool_lines = await phone.locator(".msg.tool").all_text_contents()
                delivered_by = dict(published)

                # 2. the stop button interrupts a slow answer; the stopped marker shows on both pages
                await phone.fill("#text", SLOW)
                await phone.click("#send")
                await phone.wait_for_selector(".msg.bot.streaming:not(.tool)", timeout=30_000)
                await phone.wait_for_selector("#stop:not([hidden])")
                await phone.screenshot(path=str(out / "phone-streaming.png"))
                await phone.click("#stop")
                for page in (desktop, phone):
                    await page.wait_for_selector(".msg.bot.final.ending-stopped", timeout=30_000)
                stopped = await phone.locator(".msg.ending-stopped").last.text_content()
                stop_hidden = await phone.is_hidden("#stop")

                # 3. Last-Event-ID: what replica A sent after an id, replica B sends after that id
                kept = len(replica_b.web.messages(CHAT, TENANT))
                async with httpx.AsyncClient(timeout=10) as http:
                    from_a = await sse_frames(http, f"{url_a}/v1/web/{CHAT}/events", token, None, kept)
                    resume_at = FrameId.parse(from_a[1][0])
                    missed = [f for f in from_a if FrameId.parse(f[0]).follows(resume_at)]  # type: ignore[union-attr]
                    from_b = await sse_frames(http, f"{url_b}/v1/web/{CHAT}/events", token, str(resume_at), len(missed))
                    all_b = await sse_frames(http, f"{url_b}/v1/web/{CHAT}/events", token, None, kept)

                # 4. a server-rendered HTML frame: shown as HTML, its code block highlighted
                html = '<p>Run <strong>this</strong>:</p><pre><code class="language-python">def f():\n    return "x"  # done\n</code></pre>'
                frame = WebFrame(
                    chat_id=CHAT,
                    tenant_id=TENANT,  # the session's tenant: a frame of another tenant's chat would not show
                    message_id="html-1",
                    op=WebFrameOp.SEND,
                    text=html,
                    markup="html",
                    final=True,
                )
                await ingress.producer.send_and_wait(
                    f"{settings.kafka.topic_prefix}web-frames", frame.to_json(), key=CHAT.encode()
                )
                for page in (desktop, phone):
                    await page.wait_for_selector('[data-message-id="html-1"] pre code .hl-keyword', timeout=15_000)
                strong = await phone.locator('[data-message-id="html-1"] strong').text_content()
                highlighted = await phone.locator('[data-message-id="html-1"] .hl-keyword').all_text_contents()
                await desktop.screenshot(path=str(out / "desktop.png"))
                await phone.screenshot(path=str(out / "phone.png"))

                # 5. reload: history (both sides) from persistence, each answer once
                async with httpx.AsyncClient(base_url=url_b) as http:
                    for _ in range(100):
                        items = (
                            await http.get(f"/v1/web/{CHAT}/history", headers={"authorization": f"Bearer {token}"})
                        ).json()["items"]
                        if sum(i["role"] == "user" for i in items) == 2 and any(i["ending"] for i in items):
                            break
                        await asyncio.sleep(0.2)
                fresh = await (await browser.new_context(viewport=PHONE, is_mobile=True)).new_page()
                await fresh.goto(url_b + link)
                await fresh.wait_for_function("document.getElementById('status').textContent === 'connected'")
                await fresh.wait_for_selector(".msg.ending-stopped")
                users = await fresh.locator(".msg.user").all_text_contents()
                answers = await fresh.locator(".msg.bot").all_text_contents()
                await fresh.screenshot(path=str(out / "phone-reloaded.png"), full_page=True)
            finally:
                await browser.close()
    finally:
        await ingress.producer.stop()
    print(f"\nweb chat screenshots: {out}")

    # streaming: previews with the cursor, then the final text, on A and B, one replica delivering
    assert any(s.endswith(" ▉") and "streaming" in s for s in seen), seen
    assert sum(n > 0 for n in delivered_by.values()) == 1, delivered_by  # the other page got it via Kafka
    assert tool_lines == ["🔧 search ✓"], tool_lines  # the tool ended: the line says so
    # stop
    assert [m.text for m in ingress.received] == ["hello from chromium", SLOW, "/stop"]
    assert stopped is not None and stopped.endswith("⏹ stopped") and stop_hidden
    # resume: B sends exactly what A sent after the id, nothing before it; both use the same ids
    assert kept >= 3 and 0 < len(missed) < kept
    assert from_b == missed
    assert from_a == all_b
    # HTML frames and highlighting
    assert strong == "this" and {"def", "return"} <= set(highlighted)
    # reload: both sides, each answer once, the stop marker kept
    assert users == ["hello from chromium", SLOW]
    assert answers.count(first) == 1
    assert sum(first in a for a in answers) == 1
    for name in ("desktop.png", "phone.png", "phone-streaming.png", "phone-reloaded.png"):
        assert (out / name).stat().st_size > 0
