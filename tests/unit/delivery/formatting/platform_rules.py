"""What each platform accepts as a message, written down from its API documentation.

Telegram's rules are the fake Bot API's own (`telegram_html.parse`): the same check
answers 400 over HTTP. Slack wants `& < >` escaped except in its `<…>` link tokens;
Discord shows a fence that is never closed as code to the end of the message; the web
page takes only the renderer's tags and attributes. `accepts` raises `AssertionError`
with the reason, and checks the length as the platform counts it.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from agentstream.config import TextFormat
from agentstream_delivery.formatting.styles import openable
from agentstream_delivery.splitting import utf16_len
from agentstream_testing.fake_platforms.telegram_html import parse as telegram_parse

_SLACK_TOKEN = re.compile(r"<(?:https?://|mailto:|tg://)[^<>|]*(?:\|[^<>]*)?>|&(?:amp|lt|gt);")
WEB_TAGS = frozenset(
    {"p", "strong", "em", "s", "code", "pre", "a", "ul", "ol", "li", "blockquote", "hr", "br", "table"}
    | {"thead", "tbody", "tr", "th", "td", "h1", "h2", "h3", "h4", "h5", "h6"}
)
WEB_VOID = frozenset({"hr", "br"})
WEB_ATTRS = frozenset({"href", "rel", "target", "class", "start", "style"})


def accepts(fmt: TextFormat, rendered: str, limit: int) -> None:
    match fmt:
        case TextFormat.TELEGRAM_HTML:
            shown = telegram_parse(rendered)  # raises HtmlRejected like the Bot API's 400
            assert shown.strip(), "Bad Request: message text is empty"
            assert utf16_len(shown) <= limit, f"too long: {utf16_len(shown)} > {limit}"
        case TextFormat.SLACK_MRKDWN:
            rest = _SLACK_TOKEN.sub("", rendered)
            assert "<" not in rest and ">" not in rest and "&" not in rest, f"unescaped control character: {rest!r}"
            assert len(rendered) <= limit
        case TextFormat.DISCORD_MARKDOWN:
            fences = [line for line in rendered.split("\n") if line.startswith("```")]
            assert len(fences) % 2 == 0, "a code fence is left open"
            assert len(rendered) <= limit
        case TextFormat.HTML:
            WebPage().check(rendered)
            assert len(rendered) <= limit
        case _:
            assert len(rendered) <= limit


class WebPage(HTMLParser):
    """Only the renderer's tags, balanced; only safe link targets; no script, no image."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []

    def check(self, markup: str) -> None:
        self.feed(markup)
        self.close()
        assert not self.stack, f"unclosed: {self.stack}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in WEB_TAGS, f"tag not made by the renderer: {tag}"
        for name, value in attrs:
            assert name in WEB_ATTRS, f"attribute not made by the renderer: {name}"
            if name == "href":
                assert value is not None and openable(value), f"unsafe link: {value}"
            if name == "style":
                assert value is not None and value.startswith("text-align:"), value
        if tag not in WEB_VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in WEB_VOID, f"self-closing {tag}"

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> in {self.stack}"
        self.stack.pop()
