"""The web chat of the embedded stack in headless Chromium: answers from the real runner (the demo
script, which echoes the user's Markdown back and calls the calculator), a new chat through ingress's
`/new`, then the whole stack stopped and started again on the same database, secrets and ports: the
reloaded page shows, from history alone, each answer with the HTML the live view had, and both
conversations. Screenshots go to `$AGENTSTREAM_TEST_ARTIFACTS` (default: the system temp dir)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentstream_stack.embedded import embedded_stack, free_ports
from tests.integration.delivery.test_web_chat_replicas import artifacts_dir
from tests.integration.delivery.test_web_chromium import CHROMIUM_ARGS, chromium_path, playwright_or_skip

MARKDOWN = "this:\n\n## A heading\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> a quote\n\n```python\nx = 1  # one\n```"
ANSWERS_HTML = """() => [...document.querySelectorAll('.msg.bot:not(.tool)')]
    .filter(b => !b.hidden).map(b => b.querySelector('.body').innerHTML)"""

NEW_CHAT_OPEN = """() => {
    const shown = [...document.querySelectorAll('.msg')].filter(m => !m.hidden);
    return shown.length === 0 ? !document.getElementById('empty').hidden
        : shown.every(m => m.querySelector('.body').textContent === 'Started a new conversation.');
}"""


async def finals(page: Any, count: int) -> None:
    await page.wait_for_function(
        "n => [...document.querySelectorAll('.msg.bot.final:not(.tool)')].filter(b => !b.hidden).length >= n",
        arg=count,
        timeout=60_000,
    )


async def persisted(base: str, token: str, answers: int) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for _ in range(150):
            got = await http.get("/v1/web/local/history", headers={"authorization": f"Bearer {token}"})
            if got.status_code == 200 and sum(i["role"] == "assistant" for i in got.json()["items"]) >= answers:
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"history never had {answers} answers")


@pytest.mark.timeout(240)  # a browser and the whole stack, started twice
async def test_history_after_a_stack_restart_is_the_live_view(settings_factory: Any, tmp_path: Path) -> None:
    executable = chromium_path()
    async_playwright = playwright_or_skip()
    settings = settings_factory()
    ports, secrets = free_ports(), tmp_path / "state"
    out = artifacts_dir()
    stack_args: dict[str, Any] = {"start_broker": False, "ports": ports, "state_file": None, "secrets_dir": secrets}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1000, "height": 900})
            async with embedded_stack(settings, **stack_args) as stack:
                link = stack.web_link()
                base, token = link.split("/web/")[0], link.split("#token=")[1]
                await page.goto(link)
                await page.wait_for_function("document.getElementById('status').textContent === 'connected'")
                await page.fill("#text", MARKDOWN)
                await page.keyboard.press("Enter")
                await finals(page, 1)
                await page.fill("#text", "calculate 6*7")
                await page.keyboard.press("Enter")
                await page.wait_for_function(
                    "() => [...document.querySelectorAll('.msg.tool')].some(t => t.textContent.endsWith('✓'))",
                    timeout=60_000,
                )
                await finals(page, 2)
                tool_lines = await page.locator(".msg.tool").all_text_contents()
                live_first = await page.evaluate(ANSWERS_HTML)
                await page.click("#new-chat")
                try:  # the new chat is shown: empty, or with ingress's reply to `/new` only (it may come first)
                    await page.wait_for_function(NEW_CHAT_OPEN)
                except Exception as err:  # playwright's TimeoutError: say what the page said (a refused `/new`)
                    if type(err).__name__ != "TimeoutError":
                        raise
                    status = await page.text_content("#status")
                    raise AssertionError(f"the new chat did not open; the page's status: {status!r}") from None
                await page.fill("#text", "hello again")
                await page.keyboard.press("Enter")
                await page.wait_for_function(
                    "() => [...document.querySelectorAll('.msg.bot.final:not(.tool)')]"
                    ".some(b => !b.hidden && b.textContent.includes('You said: hello again'))",
                    timeout=60_000,
                )
                live_second = await page.evaluate(ANSWERS_HTML)
                listed = await page.locator("#conversations button").all_text_contents()
                await page.screenshot(path=str(out / "stack-live.png"), full_page=True)
                await persisted(base, token, answers=3)

            stream_held = asyncio.Event()

            async def hold_stream(route: Any) -> None:  # history alone first, then the stream
                await stream_held.wait()
                await route.continue_()

            await page.route("**/v1/web/*/events?*", hold_stream)
            async with embedded_stack(settings, **stack_args):
                await page.reload()
                await page.wait_for_function("() => document.querySelectorAll('.msg.bot.history').length === 3")
                reloaded_second = await page.evaluate(ANSWERS_HTML)
                reloaded_listed = await page.locator("#conversations button").all_text_contents()
                await page.locator("#conversations button").last.click()
                reloaded_first = await page.evaluate(ANSWERS_HTML)
                await page.screenshot(path=str(out / "stack-reloaded.png"), full_page=True)
                stream_held.set()
                await page.wait_for_function("document.getElementById('status').textContent === 'connected'")
        finally:
            await browser.close()
    print(f"\nweb chat screenshots: {out}")

    assert tool_lines == ["🔧 calculator ✓"]
    assert len(live_first) == 2 and "<h2>A heading</h2>" in live_first[0] and "<table>" in live_first[0]
    assert "<blockquote>" in live_first[0] and '<span class="hl-comment"># one</span>' in live_first[0]
    assert live_first[1] == "<p>6*7 = 42</p>"
    first_question = " ".join(MARKDOWN.split())[:39] + "…"
    assert listed == ["hello again", first_question]  # the newest first, each named by its first question
    assert reloaded_first == live_first
    # ingress's reply to `/new` is a notice, which persistence does not keep: the rest is as it was
    assert live_second == ["<p>Started a new conversation.</p>", *reloaded_second] and len(reloaded_second) == 1
    assert reloaded_listed == listed
