"""The web chat page in headless Chromium shows the streamed answer.

The page (served by delivery) is opened with a session token in its URL fragment (from
`POST /v1/web/sessions`), posts the typed message to its own origin with that token, and
delivery forwards it to ingress `POST /v1/messages` at `platforms.web.api_url` with its own
gateway key. Here that URL is a stand-in ingress on 127.0.0.1 that answers 202 and produces
the run a runner would — `run.started`, paced deltas, `run.finished` — onto `events`, so the
test needs one service (delivery) and one consumer group. The page renders what delivery
streams over SSE.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from aiokafka import AIOKafkaProducer
from fastapi import FastAPI, Header, HTTPException
from rich.console import Console

from agentstream.config import Settings
from agentstream.contracts import (
    InboundMessage,
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    ReplyTarget,
    RunFinished,
    RunStarted,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap
from agentstream_testing.fixtures import ADMIN_HEADERS

pytestmark = pytest.mark.integration

CHAT = "chat-web"
GATEWAY_ENV = "AGENTSTREAM_TEST_CHROMIUM_GATEWAY_KEY"
GATEWAY_KEY = "agsk_000000000000_stand-in-gateway-key-of-the-chromium-test-00"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI (.ci/run installs it)")
        pytest.skip("no chromium on this machine")
    return path


def answer_to(text: str) -> str:
    return f"You said: {text}. Here is a streamed answer, word by word, for the page to render."


def stand_in_ingress(settings: Settings, received: list[InboundMessage]) -> FastAPI:
    app = FastAPI()
    tasks: set[asyncio.Task[None]] = set()

    async def run(msg: InboundMessage) -> None:
        key = msg.conversation_key
        target = ReplyTarget(
            platform=msg.platform, chat_id=msg.chat_id, tenant_id=msg.user.tenant_id
        )  # as ingress does
        ids = {"run_id": f"run-{msg.id}", "root_run_id": f"run-{msg.id}", "conversation_key": key}
        answer = answer_to(msg.text)
        records = [
            RunStarted(
                **ids, seq=1, assistant_id="default", connector_id="demo", reply_target=target, user_id=msg.user.id
            ),
            MessageStarted(**ids, seq=2, message_id="m1"),
        ]
        records += [
            MessageDelta(**ids, seq=3 + i, message_id="m1", text=answer[p : p + 6])
            for i, p in enumerate(range(0, len(answer), 6))
        ]
        records += [
            MessageCompleted(**ids, seq=100, message_id="m1", text=answer),
            RunFinished(**ids, seq=101, status="completed", text=answer),
        ]
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
        await producer.start()
        try:
            for record in records:
                await producer.send_and_wait(f"{settings.kafka.topic_prefix}events", record.to_json(), key=key.encode())
                await asyncio.sleep(0.03)  # a model's pace: the page sees previews before the final
        finally:
            await producer.stop()

    @app.post("/v1/messages", status_code=202)
    async def post_message(msg: InboundMessage, authorization: str = Header()) -> dict[str, str]:
        if authorization != f"Bearer {GATEWAY_KEY}":
            raise HTTPException(401, "stand-in ingress: not delivery's key")
        received.append(msg)
        task = asyncio.create_task(run(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return {"conversation_key": msg.conversation_key, "message_id": msg.id}

    return app


@asynccontextmanager
async def serve(app: FastAPI, port: int) -> AsyncIterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, no event
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await task


def playwright_or_skip() -> Any:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed")
    return async_playwright


async def test_the_chat_page_shows_the_streamed_answer(
    settings_factory: Callable[..., Settings],
    topics_created: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executable = chromium_path()
    async_playwright = playwright_or_skip()
    monkeypatch.setenv(GATEWAY_ENV, GATEWAY_KEY)
    ingress_port = free_port()
    settings = settings_factory(
        platforms={"web": {"api_url": f"http://127.0.0.1:{ingress_port}", "api_key_env": GATEWAY_ENV}}
    )
    received: list[InboundMessage] = []
    svc = bootstrap(settings, console=Console(file=io.StringIO()))
    ports = {svc.name: free_port()}
    async with (
        ServiceHost([svc], "127.0.0.1", ports) as host,
        serve(stand_in_ingress(settings, received), ingress_port),
        async_playwright() as pw,
    ):
        async with httpx.AsyncClient(base_url=host.url(svc.name), headers=ADMIN_HEADERS) as http:
            issued = await http.post(
                "/v1/web/sessions",
                json={"chat_id": CHAT, "user_id": "alice", "user_name": "Alice", "tenant_id": "acme"},
            )
        assert issued.status_code == 201, issued.text
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(host.url(svc.name) + issued.json()["url"])
            await page.wait_for_function("document.getElementById('status').textContent === 'connected'")
            address_bar = page.url
            # every text a bot bubble shows, in order: proves the answer streamed in place
            await page.evaluate("""() => {
                window.frames_seen = [];
                new MutationObserver(() => {
                    const bot = document.querySelector('.msg.bot');
                    if (bot) window.frames_seen.push(bot.textContent);
                }).observe(document.getElementById('messages'),
                           {childList: true, subtree: true, characterData: true});
            }""")
            await page.fill("#text", "hello from chromium")
            await page.click("#send")
            final = await page.wait_for_selector(".msg.bot.final", timeout=30_000)
            assert final is not None
            shown = await final.text_content()
            frames = await page.evaluate("window.frames_seen")
            user_bubbles = await page.locator(".msg.user").all_text_contents()
            accepted = await page.locator(".msg.user.accepted").count()
            await page.screenshot(path=str(tmp_path / "web-chat.png"))  # for a human look
        finally:
            await browser.close()

    expected = answer_to("hello from chromium")
    assert shown == expected
    assert "token" not in address_bar  # the page took the token out of the address bar
    assert user_bubbles == ["hello from chromium"] and accepted == 1
    assert [(m.platform, m.chat_id, m.text) for m in received] == [("web", CHAT, "hello from chromium")]
    assert [(m.user.id, m.user.name, m.user.tenant_id) for m in received] == [("alice", "Alice", "acme")]
    assert any(f.endswith(" ▉") for f in frames), frames  # previews with the cursor came first
    assert frames[-1] == expected


async def test_the_page_without_a_valid_session_shows_why_and_sends_nothing(
    settings_factory: Callable[..., Settings],
    topics_created: str,
) -> None:
    executable = chromium_path()
    async_playwright = playwright_or_skip()
    settings = settings_factory()
    svc = bootstrap(settings, console=Console(file=io.StringIO()))
    ports = {svc.name: free_port()}
    async with ServiceHost([svc], "127.0.0.1", ports) as host, async_playwright() as pw:
        other_chat, _ = svc.web_sessions.issue("another-chat", "mallory", "default")
        expired, _ = svc.web_sessions.issue(CHAT, "alice", "default", now=time.time() - 2 * 24 * 3600)
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            statuses = []
            for fragment in ("", f"#token={other_chat}", f"#token={expired}"):
                page = await browser.new_page()  # a new tab: its own sessionStorage
                await page.goto(f"{host.url(svc.name)}/web/{CHAT}{fragment}")
                await page.wait_for_function(
                    "['connecting…', 'reconnecting…'].indexOf(document.getElementById('status').textContent) < 0",
                    timeout=10_000,
                )
                statuses.append((await page.text_content("#status"), await page.is_disabled("#text")))
                await page.close()
        finally:
            await browser.close()
    assert statuses == [
        ("no session: open the chat link you were given", True),
        ("session invalid or expired: open a new chat link", False),
        ("session invalid or expired: open a new chat link", False),
    ]
