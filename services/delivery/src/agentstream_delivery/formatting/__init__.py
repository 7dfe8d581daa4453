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
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from agentstream.config import TextFormat
from agentstream_delivery.formatting.bounds import GROWTH, may_autolink, plain_growth, proportional
from agentstream_delivery.formatting.incremental import MEMO, Block, BlockMemo, BlockRenderer, Companion
from agentstream_delivery.formatting.streaming import close_dangling
from agentstream_delivery.formatting.styles import (
    DiscordMarkdownStyle,
    PlainStyle,
    SlackMrkdwnStyle,
    Style,
    TelegramHtmlStyle,
)
from agentstream_delivery.formatting.tree import Writer, join_blocks, parse
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


def _plain_blocks(tail: str, blocks: list[Block], n: int) -> list[str] | None:
    """The first `n` of `blocks` as plain text, from `tail`'s parse (the one a style's blocks just came from: cached).

    The web's HTML comes from its own parser: its blocks are the same ones (only links are validated
    differently, an inline matter), which their lines confirm; else None."""
    nodes = parse(tail)
    if len(nodes) != len(blocks) or any(
        (node.map[0], node.map[1]) != (block.first, block.end) if node.map else block.first is not None
        for node, block in zip(nodes, blocks, strict=True)
    ):
        return None
    writer = Writer(PlainStyle())
    return [writer.block(node) for node in nodes[:n]]


_COMPANION: Companion = _plain_blocks
# The markups whose frames keep their closed blocks' plain fallback too: a chat's length check counts it from
# early on. Not the web page's: its 100,000 characters are settled by the growth bound until an answer is
# thousands of characters long, and writing every block a second time cost its frames a fifth of their time;
# past that bound (or with a table) its length check measures the plain text from a chain of its own.
KEEPS_PLAIN = frozenset({TextFormat.TELEGRAM_HTML, TextFormat.SLACK_MRKDWN, TextFormat.DISCORD_MARKDOWN})


@lru_cache(maxsize=512)
def render(text: str, fmt: TextFormat) -> str:
    """`text` (the model's Markdown) in the markup `fmt`; cached: a frame is measured, then sent.

    The blocks a growing text has closed are kept from its earlier renderings (`incremental.py`);
    the result is byte for byte `render_whole`'s.
    """
    return render_kept(text, fmt, MEMO)


def render_kept(text: str, fmt: TextFormat, memo: BlockMemo) -> str:
    """`render`, keeping closed blocks in `memo` (and, for a markup, their plain fallback)."""
    if fmt is TextFormat.MARKDOWN:
        return text
    companion = _COMPANION if fmt in KEEPS_PLAIN else None
    return _joined(text, fmt, memo.parts(text, fmt, _blocks_of(fmt), companion))


def _blocks_of(fmt: TextFormat) -> BlockRenderer:
    return html_blocks if fmt is TextFormat.HTML else _BLOCKS[fmt]


def _joined(text: str, fmt: TextFormat, parts: list[str]) -> str:
    if fmt is TextFormat.HTML:
        return "".join(parts).rstrip("\n")
    return _non_empty(text, fmt, join_blocks(parts))


@lru_cache(maxsize=64)
def render_pair(text: str, fmt: TextFormat) -> tuple[str, str]:
    """`(render(text, fmt), plain(text))`, both from one parse of the text the memo does not keep."""
    return render_pair_kept(text, fmt, MEMO)


def render_pair_kept(text: str, fmt: TextFormat, memo: BlockMemo) -> tuple[str, str]:
    """`render_pair`, keeping closed blocks in `memo`."""
    if fmt is TextFormat.MARKDOWN:
        return text, plain(text)
    if fmt is not TextFormat.PLAIN:
        pair = memo.pair(text, fmt, _blocks_of(fmt), _COMPANION)
        if pair is not None:
            return _joined(text, fmt, pair.markup), _joined(text, TextFormat.PLAIN, pair.plain)
    rendered = render_kept(text, fmt, memo)
    return rendered, rendered if fmt is TextFormat.PLAIN else render_kept(text, TextFormat.PLAIN, memo)


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
    before measuring): a rendering is at most `GROWTH` times the Markdown plus so much per line
    (escapes, list indents and numbers, quote marks; nesting deeper than `tree.MAX_NEST` adds
    nothing), plain text without an autolink `plain_growth` more than its Markdown (`bounds.py`).
    Tables pad their cells and link references write their target wherever they are used, so a
    text with a `|` or a `]:` is always measured. Of a growing text, the blocks it keeps
    (`incremental.py`) are counted exactly and only its open tail is bounded; `span` narrows a
    split's search the same way (docs/delivery.md, "Formatting cost").
    """

    unit: Measure
    fmt: TextFormat

    def __call__(self, text: str) -> int:
        # Telegram's count strips the tags and entities of the whole text: each block is stripped once instead
        # (the closed ones by an earlier frame). Elsewhere measuring the joined text costs less than the sum.
        parts = _pair_parts(text, self.fmt) if self.fmt is TextFormat.TELEGRAM_HTML else None
        if parts is not None:
            shown, fallback = (
                _joined_size(parts[0], self.fmt, self.unit),
                _joined_size(parts[1], TextFormat.PLAIN, self.unit),
            )
            if shown is not None and fallback is not None:
                return max(shown, fallback)
        markup, plain_text = render_pair(text, self.fmt)
        shown = self.unit(shown_text(markup, self.fmt))
        return shown if self.fmt is TextFormat.PLAIN else max(shown, self.unit(plain_text))

    def fits(self, text: str, room: int) -> bool:
        """`self(text) <= room`, from a bound when it settles it (`bound`: a web page's 100,000 characters hold a
        long answer's any rendering), else from a render. The whole text's own growth is tried first where it can
        settle the check (the growth factor times its characters fits `room`): it needs no look for kept blocks."""
        if GROWTH[self.fmt][0] * len(text) <= room and proportional(text) and self._growth(text) <= room:
            return True
        return self.bound(text, room) <= room or self(text) <= room

    def bound(self, text: str, room: int | None = None) -> int:
        """At most `GROWTH` of the text; of a growing text, the exact length of the blocks it keeps (`MEMO.kept`,
        in the markup and as plain text) plus `GROWTH` of the rest, the open block. Where the plain text of the
        kept blocks is not kept (the web's, `KEEPS_PLAIN`), the plain fallback is bounded by the whole text's,
        and the whole text's own growth is tried first: under `room`, it settles a check without the kept
        blocks' lengths (a web page's frames, until an answer is thousands of characters long)."""
        kept = MEMO.kept(text, self.fmt)
        if kept is not None and proportional(text[kept.start :]):
            if kept.plain is None and proportional(text):
                whole = self._growth(text)
                if room is not None and whole <= room:
                    return whole
                markup = _kept_size(kept.markup, self.fmt, self.unit)
                if markup is not None:
                    plain_text = RenderedMeasure(self.unit, TextFormat.PLAIN)._growth(text)
                    return min(whole, max(markup + len(SEPARATOR) + self._growth(text[kept.start :]), plain_text))
                return whole
            sizes = _kept_sizes(kept.markup, kept.plain, self.fmt, self.unit)
            if sizes is not None:
                return max(sizes) + len(SEPARATOR) + self._growth(text[kept.start :])
        return self._growth(text) if proportional(text) else self(text)

    def span(self, text: str, room: int) -> tuple[int, int]:
        """Where the longest prefix of `text` that fits `room` ends lies: a range `splitting` bisects instead of
        the whole text. A prefix ending where a blank line closed the blocks before it is measured from those
        kept blocks without rendering: the last that fits is the range's start, the first that does not its end."""
        prefixes = MEMO.closed_prefixes(text, self.fmt)
        lo, hi = 0, len(text)
        if prefixes is None:
            return lo, hi
        markup = _prefix_sizes(prefixes.markup, self.fmt, self.unit)
        fallback = (
            markup if self.fmt is TextFormat.PLAIN else _prefix_sizes(prefixes.plain, TextFormat.PLAIN, self.unit)
        )
        for end, count in prefixes.ends:
            sizes = (markup[count], fallback[count])
            if sizes[0] is None or sizes[1] is None:
                continue
            if max(sizes[0], sizes[1]) <= room:
                lo = end
            else:
                hi = end - 1
                break
        return lo, max(lo, hi)

    def _growth(self, text: str) -> int:
        """`GROWTH` of `text`; of plain text without autolinks, `plain_growth`."""
        if self.fmt is TextFormat.PLAIN and not may_autolink(text):
            return self.unit(text) + plain_growth(text)
        growth, per_line = GROWTH[self.fmt]
        return growth * self.unit(text) + per_line * (text.count("\n") + 1)


SEPARATOR = "\n\n"  # between two blocks of a rendering (the web's HTML has none)


@lru_cache(maxsize=64)
def _pair_parts(text: str, fmt: TextFormat) -> tuple[list[str], list[str]] | None:
    """`text`'s top-level blocks in `fmt` and as plain text (read only), from one parse of what the memo does not
    keep; None where the memo does not render it by blocks."""
    if fmt is TextFormat.PLAIN:
        blocks = MEMO.parts(text, fmt, _BLOCKS[fmt])
        return blocks, blocks
    pair = MEMO.pair(text, fmt, _blocks_of(fmt), _COMPANION)
    return None if pair is None else (pair.markup, pair.plain)


def _joined_size(parts: Sequence[str], fmt: TextFormat, unit: Measure) -> int | None:
    """`unit(shown_text(_joined(text, fmt, parts), fmt))` from each part's own size (cached: a growing text's
    closed blocks are measured once); None where the join's strip reaches past a part's edge, or where nothing
    shows (the text itself is sent then)."""
    return _prefix_sizes(parts, fmt, unit)[-1]


def part_facts(part: str, fmt: TextFormat, unit: Measure) -> tuple[int, bool]:
    """A rendered block's size as shown, and whether it shows anything."""
    return unit(shown_text(part, fmt)), shows_something(part, fmt)


class _PartFacts:
    """`part_facts`, remembered per markup and unit for the last `max_parts` blocks measured (first in, first out):
    a growing text's closed blocks are measured once. Kept in plain dicts of strings and pairs of ints, which the
    garbage collector stops walking, not in an `lru_cache` (two objects to walk per block for as long as it is
    kept: the collector's full passes, paid for every object kept, cost a chat's stream more than the memo saves).
    Which facts are remembered never changes a result, only its cost."""

    def __init__(self, max_parts: int = 4096) -> None:
        self.max_parts = max_parts
        self._facts: dict[tuple[TextFormat, Measure], dict[str, tuple[int, bool]]] = {}

    def cache_clear(self) -> None:
        self._facts.clear()

    def __call__(self, part: str, fmt: TextFormat, unit: Measure) -> tuple[int, bool]:
        known = self._facts.get((fmt, unit))
        if known is None:
            known = self._facts[fmt, unit] = {}
        facts = known.get(part)
        if facts is None:
            facts = known[part] = part_facts(part, fmt, unit)
            if len(known) > self.max_parts:
                del known[next(iter(known))]
        return facts


_part_facts = _PartFacts()


def _prefix_sizes(parts: Sequence[str], fmt: TextFormat, unit: Measure) -> list[int | None]:
    """`_joined_size(parts[:n])` for every n from 0, in one pass."""
    sizes: list[int | None] = [None]  # no block: nothing shows
    total = blocks = 0
    shows_any = False
    first = last = ""
    for part in parts:
        if part:
            size, shows = _part_facts(part, fmt, unit)
            total, blocks, shows_any = total + size, blocks + 1, shows_any or shows
            first, last = first or part, part
        if not shows_any:
            sizes.append(None)
        elif fmt is TextFormat.HTML:  # joined as they are, then right-stripped of newlines
            trailing = len(last) - len(last.rstrip("\n"))
            sizes.append(None if trailing == len(last) else total - trailing)
        elif first.startswith("\n") or last.endswith("\n"):
            sizes.append(None)
        else:
            sizes.append(total + len(SEPARATOR) * (blocks - 1))
    return sizes


@lru_cache(maxsize=256)
def _kept_sizes(
    markup: tuple[str, ...], fallback: tuple[str, ...] | None, fmt: TextFormat, unit: Measure
) -> tuple[int, int] | None:
    """At least the length of kept blocks joined, in the markup as shown and as plain text (each block, plus a
    separator); None unless both are known and show something (an empty rendering is replaced by the escaped
    text)."""
    shown = _kept_size(markup, fmt, unit)
    plain_text = None if fallback is None else _kept_size(fallback, TextFormat.PLAIN, unit)
    return None if shown is None or plain_text is None else (shown, plain_text)


class _KeptSize:
    """`_kept_sizes` of one side. A growing text keeps more blocks at each frame: the sum is carried on from the
    last one of the same blocks (by their first one; a prefix is compared by its blocks' identity first, so in
    about one step per block), not summed again over every kept block. Which sums are remembered never
    changes a result, only its cost."""

    def __init__(self, max_texts: int = 512) -> None:
        self.max_texts = max_texts
        self._sums: OrderedDict[tuple[TextFormat, Measure, str], tuple[tuple[str, ...], int, bool]] = OrderedDict()

    def cache_clear(self) -> None:
        self._sums.clear()

    def __call__(self, parts: tuple[str, ...], fmt: TextFormat, unit: Measure) -> int | None:
        if not parts:
            return None
        key = (fmt, unit, parts[0])
        known = self._sums.get(key)
        done, total, shows = known if known is not None else ((), 0, False)
        if len(done) > len(parts) or parts[: len(done)] != done:
            done, total, shows = (), 0, False
        for part in parts[len(done) :]:
            size, visible = _part_facts(part, fmt, unit)
            total, shows = total + size + len(SEPARATOR), shows or visible
        self._sums[key] = (parts, total, shows)
        self._sums.move_to_end(key)
        while len(self._sums) > self.max_texts:
            self._sums.popitem(last=False)
        return total if shows else None


_kept_size = _KeptSize()


@lru_cache(maxsize=32)
def measurer(unit: Measure, fmt: TextFormat) -> Measure:
    """How splitting measures Markdown for a platform whose texts are `fmt` and counted in `unit` (one per pair:
    every length check asks for it)."""
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
    "render_pair",
    "render_pair_kept",
    "render_whole",
    "shown_text",
    "shows_something",
]
