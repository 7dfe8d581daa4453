"""Formatted answers through the real adapters to the fake platforms, which check markup as the real APIs do.

The fake Bot API parses every `parse_mode: HTML` text and answers 400 "can't parse
entities" to markup it refuses; delivery then sends that frame as plain text. Generated
Markdown streamed over HTTP is never refused: every frame, split part and final is HTML
the Bot API takes.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from agentstream.config import TextFormat
from agentstream_delivery.adapters import DiscordAdapter, SlackAdapter, TelegramAdapter
from agentstream_delivery.formatting import plain, render
from agentstream_delivery.ledger import MemoryLedger
from agentstream_delivery.render import visible_chars
from agentstream_delivery.stream_inputs import Finish
from agentstream_testing.fake_platforms import FakeDiscord, FakeSlack, FakeTelegram, telegram_html
from tests.integration.delivery.test_adapters_http import actor, deltas, stream
from tests.unit.delivery.formatting.test_frames import markdown

ANSWER = (
    "## Result\n\nThe **fastest** way is _usually_ `sort -u` (see [the manual](https://man7.org/sort.1?x=1&y=2)):\n\n"
    "- keeps ~~duplicates~~ *once*\n- handles 👍🏽 and 🇩🇪\n\n```sh\nsort -u < in.txt > out.txt\n```\n\nDone & dusted."
)
QUOTED = "> **Note** the quote\n\nThen a list:\n\n1. one\n2. two"


async def test_every_frame_reaches_telegram_as_html_it_accepts():
    async with FakeTelegram() as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url)
        # Long enough for previews between the first frame and the final (a preview keeps half a spacing in reserve).
        await stream(actor(adapter, "-10"), [*deltas(ANSWER, 9), Finish("completed", text=ANSWER)], pause=0.3)
        await adapter.close()
    calls = tg.calls_to("-10", "sendMessage", "editMessageText")
    assert len(calls) >= 3 and all(c.status == 200 and c.body["parse_mode"] == "HTML" for c in calls)
    assert tg.count(400) == 0
    [message] = tg.messages("-10")
    assert message.text == render(ANSWER, TextFormat.TELEGRAM_HTML)
    assert '<pre><code class="language-sh">sort -u &lt; in.txt &gt; out.txt</code></pre>' in message.text
    assert all(telegram_html.parse(frame) for frame in message.history)  # every frame the chat showed


async def test_a_frame_whose_markup_telegram_refuses_is_shown_as_plain_text():
    ledger = MemoryLedger()
    # A Bot API without blockquotes refuses `<blockquote>` like any unknown tag.
    async with FakeTelegram(html_tags=telegram_html.TAGS - {"blockquote"}) as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url)
        a = actor(adapter, "-11", ledger=ledger)
        await stream(a, [*deltas(QUOTED, 6), Finish("completed", text=QUOTED)], pause=0.05)
        await adapter.close()
    calls = tg.calls_to("-11", "sendMessage", "editMessageText")
    refused = [c for c in calls if c.status == 400]
    assert refused and all(c.body["parse_mode"] == "HTML" for c in refused)
    for call in refused:  # each refused frame went out again at once, as plain text, and landed
        retry = calls[calls.index(call) + 1]
        assert retry.status == 200 and "parse_mode" not in retry.body and "<" not in retry.body["text"]
    [message] = tg.messages("-11")
    assert message.text == plain(QUOTED) == "> Note the quote\n\nThen a list:\n\n1. one\n2. two"
    assert [row.state for row in ledger.rows.values()] == ["sent"]


async def test_slack_gets_mrkdwn_and_discord_its_markdown():
    async with FakeSlack() as slack, FakeDiscord() as discord:
        sa, da = SlackAdapter(slack.token, api_url=slack.url), DiscordAdapter(discord.token, api_url=discord.url)
        await stream(actor(sa, "C9"), [*deltas(ANSWER, 40), Finish("completed", text=ANSWER)], pause=0.02)
        await stream(actor(da, "D9"), [*deltas(ANSWER, 40), Finish("completed", text=ANSWER)], pause=0.02)
        await sa.close()
        await da.close()
    assert slack.texts("C9") == [render(ANSWER, TextFormat.SLACK_MRKDWN)]
    assert all(c.body["mrkdwn"] is True for c in slack.calls_to("C9"))
    assert "<https://man7.org/sort.1?x=1&y=2|the manual>" in slack.texts("C9")[0]
    assert discord.texts("D9") == [render(ANSWER, TextFormat.DISCORD_MARKDOWN)]
    assert "```sh\nsort -u < in.txt > out.txt\n```" in discord.texts("D9")[0]


async def test_slack_with_formatting_off_gets_plain_text_its_control_characters_escaped():
    async with FakeSlack() as slack:
        adapter = SlackAdapter(slack.token, api_url=slack.url)
        adapter.capabilities = replace(adapter.capabilities, formatting=TextFormat.PLAIN)  # `formatting: plain`
        text = "Ping <!channel> & **everyone**"
        await stream(actor(adapter, "C8"), [*deltas(text, 40), Finish("completed", text=text)])
        await adapter.close()
    assert slack.texts("C8") == ["Ping &lt;!channel&gt; &amp; everyone"]
    assert all(c.body["mrkdwn"] is False for c in slack.calls_to("C8"))


@pytest.mark.timeout(120)  # each example streams over HTTP, a frame every 20 ms
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(markdown, min_size=15, max_size=40).map("\n\n".join), st.integers(15, 60))
# Two frames whose Markdown differs only in trailing blank lines render alike: no edit between them.
@example("\n" * 24 + "<<<<\n\n\n\n", 15)
# The last preview ended in an opening fence: its cursor became the fence's language, the preview rendered
# like the final, and the final's edit was refused (when the stream's timing made it the last preview).
@example(
    "&nbsp;#--# &nbsp;# ## &nbsp;# <🇩🇪word#### # \n\n\n\n# \n\n\n\n\n\n\n\n# # \n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n# \n\n```python\n\n\n# \n\n\n\n\n\n\n\n# # # # # # # \n\n# # \n\n# # # # # # # # \n\n\n\n# # # # # # # # word# \n\n# \n```\n\n\n\n\n\n\n```# 👍🏽# ",
    15,
)
def test_generated_markdown_streamed_to_telegram_is_never_refused(text: str, chunk: int) -> None:
    assume(visible_chars(text))
    asyncio.run(stream_generated(text, chunk))


async def stream_generated(text: str, chunk: int) -> None:
    async with FakeTelegram() as tg:
        adapter = TelegramAdapter(tg.token, api_url=tg.url)
        # Every frame due at once and a small limit: many previews, and answers split into several messages.
        adapter.capabilities = replace(
            adapter.capabilities, chat_interval=0.0, edit_interval=0.01, buffer_threshold=10, max_length=620
        )
        await stream(actor(adapter, "-12"), [*deltas(text, chunk), Finish("completed", text=text)], pause=0.02)
        await adapter.close()
    calls = tg.calls_to("-12", "sendMessage", "editMessageText")
    assert calls and all(c.body.get("parse_mode") == "HTML" for c in calls)
    refused = [(c.status, c.body["text"]) for c in calls if c.status != 200]
    assert refused == [], refused
    for message in tg.messages("-12"):
        assert all(telegram_html.parse(frame) for frame in message.history)
