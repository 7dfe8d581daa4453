"""The web chat page's features in headless Chromium, and its history after the services restart.

Delivery and persistence share the test broker and database; a stand-in ingress on 127.0.0.1
produces the run a runner would for each posted message (a tool call, then a Markdown answer with a
heading, a table, a quote and a code block), keeps each message id once as ingress does, refuses the
first post of a "flaky" message with 502, and starts a new history session on `/new`. The page is
driven as a person would: a two-line message (Shift+Enter, then Enter), the finished tool line, copy,
a failed send retried, a new chat. Then delivery and persistence are stopped and started again and
the page reloaded: each answer from history has the same HTML (and looks the same, screenshot of the
bubble) as the live view showed. Screenshots go to `$AGENTSTREAM_TEST_ARTIFACTS` (default: the
system temp dir), path printed.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import JSONResponse
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
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_delivery import bootstrap
from agentstream_persistence.bootstrap import bootstrap as bootstrap_persistence
from agentstream_testing.fixtures import ADMIN_HEADERS, ADMIN_TOKEN_ENV
from tests.integration.delivery.test_web_chat_replicas import artifacts_dir
from tests.integration.delivery.test_web_chromium import CHROMIUM_ARGS, chromium_path, playwright_or_skip, serve

pytestmark = pytest.mark.integration

CHAT = "chat-page"
TENANT = "acme"
GATEWAY_ENV = "AGENTSTREAM_TEST_PAGE_GATEWAY_KEY"
GATEWAY_KEY = "agsk_000000000000_stand-in-gateway-key-of-the-page-test-00000"
SECRET_ENV = "AGENTSTREAM_TEST_PAGE_WEB_SECRET"
DESKTOP = {"width": 1100, "height": 900}
LOOKING = "Let me calculate that."
FLAKY = "a flaky question"
TWO_LINES = "first line\nsecond line"


def answer_to(text: str) -> str:
    first = text.splitlines()[0]
    return (
        f"## About {first}\n\nThe answer is **42**, see `f`.\n\n"
        "| x | y | product |\n|---|---|---|\n| 6 | 7 | 42 |\n| 2 | 21 | 42 |\n\n"
        "> A quote from the calculator.\n\n"
        "```python\ndef f():\n    return 6 * 7  # the answer\n```\n\nDone."
    )


class StandInIngress:
    """Answers 202 and produces the run's events; an id seen before is kept once (ingress's dedupe)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.posts: list[InboundMessage] = []  # every post that reached it, repeats included
        self.started: dict[str, str] = {}  # message id -> text of the run started for it
        self.session = 1
        self.refused_once: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.producer: AIOKafkaProducer | None = None

    async def produce(self, record: RunEvent) -> None:
        assert self.producer is not None
        topic = f"{self.settings.kafka.topic_prefix}events"
        await self.producer.send_and_wait(topic, record.to_json(), key=record.conversation_key.encode())

    async def run(self, msg: InboundMessage, ids: dict[str, str], session: str) -> None:
        target = ReplyTarget(platform=msg.platform, chat_id=msg.chat_id, tenant_id=msg.user.tenant_id)
        answer = answer_to(msg.text)
        await self.produce(
            RunStarted(
                **ids,
                seq=1,
                assistant_id="default",
                connector_id="demo",
                reply_target=target,
                user_id=msg.user.id,
                tenant_id=msg.user.tenant_id,
                session_id=session,
                input=[ChatMessage(role=MessageRole.USER, content=msg.text)],
            )
        )
        await self.produce(MessageStarted(**ids, seq=2, message_id="m0"))
        await self.produce(MessageCompleted(**ids, seq=3, message_id="m0", text=LOOKING))
        await self.produce(SegmentBreak(**ids, seq=4))
        await self.produce(ToolCall(**ids, seq=5, call_id="c1", tool="calculator", arguments='{"x": "6*7"}'))
        await asyncio.sleep(0.3)  # the tool's work: the line shows it running meanwhile
        await self.produce(ToolResult(**ids, seq=6, call_id="c1", tool="calculator", ok=True, content="42"))
        await self.produce(MessageStarted(**ids, seq=7, message_id="m1"))
        for i, p in enumerate(range(0, len(answer), 24)):
            await self.produce(MessageDelta(**ids, seq=8 + i, message_id="m1", text=answer[p : p + 24]))
            await asyncio.sleep(0.02)
        await self.produce(MessageCompleted(**ids, seq=1000, message_id="m1", text=answer))
        await self.produce(RunFinished(**ids, seq=1001, status="completed", text=answer))

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/messages", status_code=202)
        async def post_message(msg: InboundMessage, authorization: str = Header()) -> Any:
            if authorization != f"Bearer {GATEWAY_KEY}":
                raise HTTPException(401, "stand-in ingress: not delivery's key")
            self.posts.append(msg)
            if msg.text == FLAKY and msg.id not in self.refused_once:
                self.refused_once.add(msg.id)
                return JSONResponse({"detail": "stand-in: ingress had a bad moment"}, status_code=502)
            if msg.text == "/new":
                self.session += 1
            elif msg.id not in self.started:
                self.started[msg.id] = msg.text
                run_id = f"{msg.conversation_key}/run-{msg.id}"
                ids = {"run_id": run_id, "root_run_id": run_id, "conversation_key": msg.conversation_key}
                task = asyncio.create_task(self.run(msg, ids, f"s{self.session}"))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            return {"conversation_key": msg.conversation_key, "message_id": msg.id}

        return app


ANSWERS_HTML = """() => [...document.querySelectorAll('.msg.bot:not(.tool)')]
    .filter(b => !b.hidden).map(b => b.querySelector('.body').innerHTML)"""
# How each shown answer is laid out (size, and where its table, quote and code sit in it): the same
# layout is the same look; the bubbles' screenshots are saved beside for a human eye (a pixel compare
# would see the subpixel offset of a page scrolled elsewhere).
ANSWER_BOX = """() => [...document.querySelectorAll('.msg.bot.final:not(.tool)')].filter(b => !b.hidden).map(b => {
    const r = b.getBoundingClientRect();
    const at = sel => { const e = b.querySelector(sel); if (!e) return null;
        const q = e.getBoundingClientRect(); return [q.left - r.left, q.top - r.top, q.width, q.height]; };
    return [r.width, r.height, at('table'), at('blockquote'), at('pre'), at('h2')];
})"""
VISIBLE_TEXTS = (
    """sel => [...document.querySelectorAll(sel)].filter(b => !b.closest('.msg').hidden).map(b => b.textContent)"""
)


async def answered(page: Any, count: int) -> None:
    await page.wait_for_function(
        "n => document.querySelectorAll('.msg.bot.final:not(.tool) h2').length >= n", arg=count, timeout=30_000
    )


async def wait_for_history(url: str, token: str, users: int) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        for _ in range(150):
            got = await http.get(f"/v1/web/{CHAT}/history", headers={"authorization": f"Bearer {token}"})
            items = got.json()["items"] if got.status_code == 200 else []
            if sum(i["role"] == "user" for i in items) == users and sum("<h2>" in i["text"] for i in items) == users:
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"persistence never had {users} answered questions: {items}")


@pytest.mark.timeout(240)  # a browser, two services started twice: a whole session on purpose
async def test_the_page_features_and_history_after_a_restart_match_the_live_view(
    settings_factory: Callable[..., Settings],
    topics_created: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executable = chromium_path()
    async_playwright = playwright_or_skip()
    monkeypatch.setenv(GATEWAY_ENV, GATEWAY_KEY)
    monkeypatch.setenv(SECRET_ENV, "a-session-secret-that-outlives-a-restart-" + "x" * 16)
    ingress_port, persistence_port, delivery_port = free_port(), free_port(), free_port()
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
    ports = {"delivery": delivery_port, "persistence": persistence_port}
    ingress = StandInIngress(settings)
    out = artifacts_dir()
    ingress.producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers, enable_idempotence=False)
    await ingress.producer.start()
    try:
        async with serve(ingress.app(), ingress_port), async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            try:
                context = await browser.new_context(viewport=DESKTOP)
                await context.grant_permissions(["clipboard-read", "clipboard-write"])
                page = await context.new_page()
                delivery = bootstrap(settings, console=Console(file=io.StringIO()))
                async with ServiceHost([delivery, bootstrap_persistence(settings)], "127.0.0.1", ports) as host:
                    url = host.url("delivery")
                    assert delivery.web_reader is not None
                    await asyncio.wait_for(delivery.web_reader.ready.wait(), 30)
                    async with httpx.AsyncClient(base_url=url, headers=ADMIN_HEADERS) as http:
                        issued = await http.post(
                            "/v1/web/sessions", json={"chat_id": CHAT, "user_id": "alice", "tenant_id": TENANT}
                        )
                    assert issued.status_code == 201, issued.text
                    token = issued.json()["token"]
                    await page.goto(url + issued.json()["url"])
                    await page.wait_for_function("document.getElementById('status').textContent === 'connected'")

                    # the empty state, the focused input, the icon
                    empty_shown = await page.is_visible("#empty")
                    focused = await page.evaluate("document.activeElement.id")
                    icon = await page.request.get(url + "/favicon.ico")
                    icon_type, icon_body = icon.headers["content-type"], await icon.text()
                    await page.screenshot(path=str(out / "page-empty.png"))

                    # 1. a two-line message: Shift+Enter is a new line (the input grows), Enter sends
                    one_line_height = await page.evaluate("document.getElementById('text').offsetHeight")
                    await page.type("#text", "first line")
                    await page.keyboard.press("Shift+Enter")
                    await page.type("#text", "second line")
                    typed = await page.input_value("#text")
                    two_line_height = await page.evaluate("document.getElementById('text').offsetHeight")
                    posted_before_enter = len(ingress.posts)
                    await page.keyboard.press("Enter")
                    await answered(page, 1)
                    await page.wait_for_function(
                        "() => [...document.querySelectorAll('.msg.tool')].every(t => t.textContent.endsWith('✓'))"
                    )
                    tool_lines = await page.evaluate(VISIBLE_TEXTS, ".msg.tool")
                    cleared = await page.input_value("#text")
                    styles = await page.evaluate("""() => {
                        const answer = [...document.querySelectorAll('.msg.bot.final')].pop();
                        const css = (sel, prop) => getComputedStyle(answer.querySelector(sel))[prop];
                        return {
                            quote: css('blockquote', 'borderLeftWidth'),
                            table: css('table', 'borderCollapse'),
                            cell: css('td', 'borderTopWidth'),
                            head: css('th', 'backgroundColor'),
                            pre: css('pre', 'backgroundColor'),
                            keyword: answer.querySelectorAll('pre code .hl-keyword').length,
                        };
                    }""")

                    # 2. copy an answer
                    await page.locator(".msg.bot.final:not(.tool) .copy").last.click()
                    copied = await page.evaluate("navigator.clipboard.readText()")

                    # 3. a send that fails is marked on its bubble; Retry sends the same message again
                    await page.fill("#text", FLAKY)
                    await page.keyboard.press("Enter")
                    failed = page.locator(".msg.user.failed")
                    await failed.wait_for(timeout=15_000)
                    failure_note = await failed.locator(".send-error").text_content()
                    await page.screenshot(path=str(out / "page-failed-send.png"))
                    await failed.get_by_role("button", name="Retry").click()
                    await page.wait_for_selector(".msg.user.accepted >> text=" + FLAKY)
                    await answered(page, 2)
                    still_failed = await page.locator(".msg.user.failed").count()
                    order = await page.evaluate(
                        "() => [...document.querySelectorAll('.msg:not(.tool)')].map(m => m.className.split(' ')[1])"
                    )

                    # 4. a new chat: empty again, listed with the first one; it takes the next message
                    await page.click("#new-chat")
                    await page.wait_for_selector("#empty:not([hidden])")
                    new_chat_empty = await page.evaluate(VISIBLE_TEXTS, ".msg")
                    await page.fill("#text", "a second conversation")
                    await page.keyboard.press("Enter")
                    await answered(page, 3)
                    listed = await page.locator("#conversations button").all_text_contents()

                    # the live view, as it was: each answer's HTML, a screenshot of the page and of one answer
                    live_second = await page.evaluate(ANSWERS_HTML)
                    await page.locator("#conversations button").last.click()  # the first conversation
                    live_first = await page.evaluate(ANSWERS_HTML)
                    live_users = await page.evaluate(VISIBLE_TEXTS, ".msg.user .body")
                    live_box = await page.evaluate(ANSWER_BOX)
                    await page.locator(".msg.bot.final:not(.tool)").nth(1).screenshot(path=str(out / "answer-live.png"))
                    await page.screenshot(path=str(out / "page-live.png"), full_page=True)
                    await wait_for_history(url, token, users=3)

                # 5. delivery and persistence restart; the page reloads. Its stream is held until the
                # history is shown, so what is compared is history alone; then the stream's replay of
                # the recent frames replaces it, with the same HTML again
                delivery = bootstrap(settings, console=Console(file=io.StringIO()))
                stream_held = asyncio.Event()

                async def hold_stream(route: Any) -> None:
                    await stream_held.wait()
                    await route.continue_()

                await page.route("**/v1/web/*/events?*", hold_stream)
                async with ServiceHost([delivery, bootstrap_persistence(settings)], "127.0.0.1", ports):
                    assert delivery.web_reader is not None
                    await asyncio.wait_for(delivery.web_reader.ready.wait(), 30)
                    await page.reload()
                    await page.wait_for_function(
                        "() => document.querySelectorAll('.msg.bot.history').length === 6", timeout=30_000
                    )
                    reloaded_second = await page.evaluate(ANSWERS_HTML)
                    reloaded_listed = await page.locator("#conversations button").all_text_contents()
                    await page.locator("#conversations button").last.click()
                    reloaded_first = await page.evaluate(ANSWERS_HTML)
                    reloaded_users = await page.evaluate(VISIBLE_TEXTS, ".msg.user .body")
                    reloaded_box = await page.evaluate(ANSWER_BOX)
                    await (
                        page.locator(".msg.bot.final:not(.tool)")
                        .nth(1)
                        .screenshot(path=str(out / "answer-reloaded.png"))
                    )
                    await page.screenshot(path=str(out / "page-reloaded.png"), full_page=True)
                    writable = await page.is_enabled("#text")
                    # on a phone the list is behind the menu button, and closes once a conversation is picked
                    await page.set_viewport_size({"width": 390, "height": 844})
                    phone_list_hidden = await page.is_hidden("#sidebar")
                    await page.get_by_role("button", name="Conversations").click()
                    menu_opened = (
                        await page.is_visible("#sidebar"),
                        await page.get_attribute("#menu", "aria-expanded"),
                    )
                    await page.locator("#conversations button").first.click()
                    phone_list_closed = await page.is_hidden("#sidebar")
                    newest_writable = await page.is_enabled("#text")
                    await page.screenshot(path=str(out / "page-phone.png"))
                    stream_held.set()
                    await page.wait_for_function("document.getElementById('status').textContent === 'connected'")
                    await page.wait_for_function(
                        "() => document.querySelectorAll('.msg.bot.history').length === 0", timeout=30_000
                    )
                    replayed_second = await page.evaluate(ANSWERS_HTML)  # the newest, picked on the phone
            finally:
                await browser.close()
    finally:
        await ingress.producer.stop()
    print(f"\nweb chat page screenshots: {out}")

    assert empty_shown and focused == "text"
    assert icon.status == 200 and icon_type == "image/svg+xml" and icon_body.startswith("<svg")
    # multi-line input
    assert typed == TWO_LINES and posted_before_enter == 0 and two_line_height > one_line_height
    assert cleared == ""
    assert ingress.posts[0].text == TWO_LINES
    # the tool line, finished; tables, quotes and code styled
    assert tool_lines == ["🔧 calculator ✓"]
    assert styles["quote"] != "0px" and styles["table"] == "collapse" and styles["cell"] != "0px"
    assert styles["head"] != "rgba(0, 0, 0, 0)" and styles["pre"] != "rgba(0, 0, 0, 0)" and styles["keyword"] >= 2
    # copy
    assert "The answer is 42, see f." in copied and "def f():" in copied
    # a failed send, then its retry: the same message id twice, one run
    assert failure_note == "Not sent: HTTP 502Retry" and still_failed == 0
    flaky = [m for m in ingress.posts if m.text == FLAKY]
    assert len(flaky) == 2 and flaky[0].id == flaky[1].id
    assert list(ingress.started.values()).count(FLAKY) == 1
    assert order == ["user", "bot", "bot", "user", "bot", "bot"]  # each question above its answers
    # new chat
    assert new_chat_empty == []
    assert listed == ["a second conversation", "first line second line"]
    # after the restart: the same answers, the same HTML, the same look
    assert len(live_first) == 4 and len(live_second) == 2 and "<table>" in live_first[1]
    assert (reloaded_first, reloaded_second) == (live_first, live_second)
    assert replayed_second == live_second  # the recent frames replayed over history: nothing changes
    assert reloaded_users == live_users == [TWO_LINES, FLAKY]
    assert reloaded_listed == listed
    assert reloaded_box == live_box and len(live_box) == 4
    assert not writable and newest_writable  # an earlier conversation is read only, the newest is not
    assert phone_list_hidden and menu_opened == (True, "true") and phone_list_closed
    for name in ("page-empty.png", "page-failed-send.png", "page-live.png", "page-reloaded.png", "answer-live.png"):
        assert (out / name).stat().st_size > 0
