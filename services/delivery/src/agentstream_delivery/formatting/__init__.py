"""The model's Markdown rendered to each platform's markup, and measured the way the platform counts.

`render(text, fmt)` is the one entry point (`render_frame` for a frame, which closes a
preview's dangling markup first); `plain(text)` is what a frame the platform rejected for
its markup is re-sent as. `measurer(measure, fmt)` is how splitting counts a
message: the platform's unit (characters or UTF-16 code units) of what the platform shows
(Telegram counts the text after its HTML is parsed), and never less than the plain
fallback of the same text, so a frame re-sent as plain text still fits.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from agentstream.config import TextFormat
from agentstream_delivery.formatting.incremental import MEMO, Block, BlockMemo, BlockRenderer
from agentstream_delivery.formatting.streaming import close_dangling
from agentstream_delivery.formatting.styles import (
    DiscordMarkdownStyle,
    PlainStyle,
    SlackMrkdwnStyle,
    Style,
    TelegramHtmlStyle,
)
from agentstream_delivery.formatting.tree import Writer, join_blocks
from agentstream_delivery.formatting.web_html import html_blocks, render_html

Measure = Callable[[str], int]
_TAG = re.compile(r"<[^>]*>")
_VISIBLE = re.compile(r"(?:^|>)[^<]*?[^\s<]")
STYLES: dict[TextFormat, Callable[[], Style]] = {
    TextFormat.PLAIN: PlainStyle,
    TextFormat.TELEGRAM_HTML: TelegramHtmlStyle,
    TextFormat.SLACK_MRKDWN: SlackMrkdwnStyle,
    TextFormat.DISCORD_MARKDOWN: DiscordMarkdownStyle,
}


def _written_with(style: Callable[[], Style]) -> BlockRenderer:
    def blocks(text: str) -> list[Block]:
        return Writer(style()).top_blocks(text)

    return blocks


_BLOCKS: dict[TextFormat, BlockRenderer] = {fmt: _written_with(style) for fmt, style in STYLES.items()}


@lru_cache(maxsize=512)
def render(text: str, fmt: TextFormat) -> str:
    """`text` (the model's Markdown) in the markup `fmt`; cached: a frame is measured, then sent.

    The blocks a growing text has closed are kept from its earlier renderings (`incremental.py`);
    the result is byte for byte `render_whole`'s.
    """
    return render_kept(text, fmt, MEMO)


def render_kept(text: str, fmt: TextFormat, memo: BlockMemo) -> str:
    """`render`, keeping closed blocks in `memo`."""
    if fmt is TextFormat.MARKDOWN:
        return text
    if fmt is TextFormat.HTML:
        return "".join(memo.parts(text, fmt, html_blocks)).rstrip("\n")
    return _non_empty(text, fmt, join_blocks(memo.parts(text, fmt, _BLOCKS[fmt])))


def render_whole(text: str, fmt: TextFormat) -> str:
    """`render` from one parse of the whole text, nothing kept (what `render` is checked against)."""
    if fmt is TextFormat.MARKDOWN:
        return text
    if fmt is TextFormat.HTML:
        return render_html(text)
    return _non_empty(text, fmt, Writer(STYLES[fmt]()).render(text))


def _non_empty(text: str, fmt: TextFormat, out: str) -> str:
    if not shows_something(out, fmt) and text.strip():  # `<pre></pre>`: a platform refuses an empty text
        return STYLES[fmt]().text(text)
    return out


def shows_something(rendered: str, fmt: TextFormat) -> bool:
    """`shown_text(rendered, fmt).strip() != ""`, without unescaping the whole text: the first character
    outside a tag that is not whitespace (the styles escape only `& < >`, none of which shows as whitespace)."""
    if fmt is TextFormat.TELEGRAM_HTML:
        return _VISIBLE.search(rendered) is not None
    return not rendered.isspace() and rendered != ""


@lru_cache(maxsize=256)
def render_frame(text: str, fmt: TextFormat, *, final: bool) -> str:
    """A frame as the platform gets it: a preview's dangling `**`, `~~` or code span closed first."""
    if final or fmt is TextFormat.MARKDOWN:
        return render(text, fmt)
    return render(close_dangling(text), fmt)


def plain(text: str) -> str:
    return render(text, TextFormat.PLAIN)


def shown_text(rendered: str, fmt: TextFormat) -> str:
    """What the platform counts of a rendered message: Telegram parses its HTML away first."""
    if fmt is TextFormat.TELEGRAM_HTML:
        return html.unescape(_TAG.sub("", rendered))
    return rendered


@dataclass(frozen=True)
class RenderedMeasure:
    """The length of Markdown once rendered to `fmt`, as the platform counts it (`unit`).

    Rendering costs a parse, so `bound` gives a cheap upper bound first (splitting checks it
    before measuring): a rendering is at most `GROWTH` times the Markdown plus `PER_LINE` per
    line (escapes, list indents and numbers, quote marks; nesting deeper than `tree.MAX_NEST`
    adds nothing). Tables pad their cells, so a text with a `|` is always measured.
    """

    unit: Measure
    fmt: TextFormat

    def __call__(self, text: str) -> int:
        shown = self.unit(shown_text(render(text, self.fmt), self.fmt))
        return shown if self.fmt is TextFormat.PLAIN else max(shown, self.unit(plain(text)))

    def bound(self, text: str) -> int:
        if "|" in text:
            return self(text)
        growth, per_line = GROWTH[self.fmt]
        return growth * self.unit(text) + per_line * (text.count("\n") + 1)


# (times the Markdown's length, plus per line): Slack escapes `&` as five characters, the web's HTML has tags.
GROWTH: dict[TextFormat, tuple[int, int]] = {
    TextFormat.PLAIN: (3, 32),
    TextFormat.TELEGRAM_HTML: (3, 32),
    TextFormat.DISCORD_MARKDOWN: (3, 32),
    TextFormat.SLACK_MRKDWN: (5, 32),
    TextFormat.HTML: (12, 160),
}


def measurer(unit: Measure, fmt: TextFormat) -> Measure:
    """How splitting measures Markdown for a platform whose texts are `fmt` and counted in `unit`."""
    return unit if fmt is TextFormat.MARKDOWN else RenderedMeasure(unit, fmt)


__all__ = [
    "Measure",
    "RenderedMeasure",
    "TextFormat",
    "measurer",
    "plain",
    "render",
    "render_frame",
    "render_kept",
    "render_whole",
    "shown_text",
    "shows_something",
]
