"""A growing text rendered block by block is byte for byte the whole text rendered at once.

Generated Markdown is streamed in generated chunkings; at every chunk each markup renders
the text so far, its preview frame and a shorter prefix (what a length bisection asks),
keeping closed blocks in one memo, and each result is compared with `render_whole`.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentstream.config import TextFormat
from agentstream_delivery.formatting import (
    STYLES,
    _PartFacts,
    part_facts,
    render,
    render_kept,
    render_pair_kept,
    render_whole,
    shown_text,
    shows_something,
)
from agentstream_delivery.formatting.incremental import BlockMemo
from agentstream_delivery.formatting.streaming import close_dangling
from agentstream_delivery.formatting.tree import Writer, inline_tokens, parser_without_references
from agentstream_delivery.formatting.web_html import html_blocks
from agentstream_delivery.render import CURSOR
from agentstream_delivery.splitting import MEASURES
from tests.unit.delivery.formatting.test_frames import PIECES

MARKUPS = [f for f in TextFormat if f is not TextFormat.MARKDOWN]
# Blocks a model writes, so that most texts have many closed ones; plus what is rendered whole.
BLOCKS = [
    "\n\n", "\n", "# Title\n\n", "- a\n- b\n\n", "1. one\n2. two\n", "> quoted\n\n", "```py\nx = 1\n```\n\n",
    "    indented code\n", "---\n\n", "para\n===\n", "| a | b |\n|---|---|\n| 1 | 2 |\n\n", "[ref]: https://e.com\n",
    "[ref]\n\n", "a\r\nb", "- item\n\n  continued\n\n", "text\n\n    code after a blank\n", "~~~\nfence\n",
    " \t\n", "\u00a0\n", "\x0c\n", "```\n\n\n", "```\n", "| x |\n|---|\n\n", "> q\n\n> r\n", "***\n\n",
]  # fmt: skip
markdown = st.lists(
    st.sampled_from(PIECES + BLOCKS) | st.text(alphabet="ab <>&*_`#-|=>\n \t\u00a0😀", max_size=8), max_size=60
).map("".join)
chunkings = st.lists(st.integers(1, 40), min_size=1, max_size=8)


def check_stream(text: str, sizes: list[int], memo: BlockMemo) -> None:
    ends = itertools.takewhile(lambda e: e < len(text), itertools.accumulate(itertools.cycle(sizes)))
    for i, end in enumerate([*ends, len(text)]):
        so_far = text[:end]
        for fmt in MARKUPS:
            for t in (so_far, close_dangling(so_far + CURSOR), so_far[: end // 2]):
                whole = render_whole(t, fmt)
                if i % 2:  # as a length check asks: the markup and its plain fallback from one parse
                    assert render_pair_kept(t, fmt, memo) == (whole, render_whole(t, TextFormat.PLAIN)), (fmt, t)
                else:
                    assert render_kept(t, fmt, memo) == whole, (fmt, t)
                check_kept(t, fmt, memo)


def blocks_of(text: str, fmt: TextFormat) -> list[str]:
    if fmt is TextFormat.HTML:
        return [block.text for block in html_blocks(text)]
    return [block.text for block in Writer(STYLES[fmt]()).top_blocks(text)]


def check_kept(text: str, fmt: TextFormat, memo: BlockMemo) -> None:
    """What a length check reads without rendering: the first blocks of `text`, in the markup and as plain text,
    and where the rest begins."""
    kept = memo.kept(text, fmt)
    if kept is None:
        return
    markup = blocks_of(text, fmt)
    n = len(kept.markup)
    assert list(kept.markup) == markup[:n], (fmt, text)
    if kept.plain is not None:  # not kept where the markup's frames do not keep it (`KEEPS_PLAIN`)
        assert list(kept.plain) == blocks_of(text, TextFormat.PLAIN)[:n], (fmt, text)
    assert blocks_of(text[kept.start :], fmt) == markup[n:], (fmt, text)


@pytest.mark.timeout(180)  # every chunk of each example, three texts, five markups
@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(markdown, chunkings)
@example("- a\n\n-\n\nb\n\n", [1])
@example(
    "[ref] and [ref][]\n\npara one, long enough to be kept\n\npara two\n\n[ref]: https://e.com\n", [9]
)  # kept, then `]:`
# A block a blank line ends for good is closed at that line's end, before the next block begins.
@example("para\n\n    code after a blank\n\nmore", [1])
@example("# Title\n\n- a\n- b\n\n```py\nx\n```\n\n| a |\n|---|\n\nend", [3])
@example("```\n\n\ncode\n\n```\n\nafter", [1])  # an open fence's blank lines end nothing
@example("para\n \t\n  para two\n", [1])  # spaces and tabs make a blank line
@example("para\n\u00a0\nstill the paragraph\n\n", [1])  # a no-break space does not
@example("para\n\x0c\nstill the paragraph\n\n", [1])  # nor does a form feed
@example("title\n===\n\n===\n\n", [1])  # a setext heading, then a paragraph
# The web's HTML renders the chats' parse where both parsers accept the same links, its own parse elsewhere.
@example("[a](ftp://x) [b](https://y)\n\n[c [d](rel) e](https://g)\n\n![i](ftp://j) ![k](https://l)\n\n[m](n)", [5])
@example("[a ![b](ftp://c)](https://d)\n\n![e [f](g)](https://h)\n\n[x](javascript:alert(1))\n\n", [7])
def test_a_stream_rendered_block_by_block_equals_the_whole_render(text: str, sizes: list[int]) -> None:
    check_stream(text, sizes, BlockMemo(head=1))


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(markdown, min_size=2, max_size=3), chunkings)
def test_texts_that_begin_alike_keep_their_own_blocks(texts: list[str], sizes: list[int]) -> None:
    # Streams whose first characters are the same, rendered in turns, share one memo entry.
    opening = "Sure! Here is the answer.\n\n"
    memo = BlockMemo(head=len(opening))
    for t in texts:
        check_stream(opening + t, sizes, memo)
    for t in texts:  # a text seen before, after the others took the entry
        check_stream(opening + t, sizes[::-1], memo)


def test_render_keeps_the_closed_blocks_of_a_growing_answer() -> None:
    answer = "".join(f"## Part {i}\n\nSome **bold** words and `code`.\n\n- one\n- two\n\n" for i in range(30))
    memo = BlockMemo()
    for end in range(0, len(answer), 50):
        assert render_kept(answer[:end], TextFormat.TELEGRAM_HTML, memo) == render_whole(
            answer[:end], TextFormat.TELEGRAM_HTML
        )
    (chain,) = memo._chains[(TextFormat.TELEGRAM_HTML, answer[: memo.head])]
    # Every closed block is kept: only the last one is parsed again.
    assert len(chain.parts) >= answer.count("\n\n") - 3
    assert render(answer, TextFormat.TELEGRAM_HTML) == render_whole(answer, TextFormat.TELEGRAM_HTML)


def test_the_memo_forgets_the_least_recently_used_texts() -> None:
    memo = BlockMemo(max_texts=3, head=8)
    for i in range(5):
        text = f"text {i:03d}\n\npara\n\nmore\n"
        assert render_kept(text, TextFormat.PLAIN, memo) == render_whole(text, TextFormat.PLAIN)
    assert len(memo) == 3


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(markdown)
@example("```\n```")
@example("&#32;")
def test_whether_a_rendering_shows_anything_is_told_without_unescaping_it(text: str) -> None:
    for fmt in MARKUPS:
        for out in (Writer(STYLES[fmt]()).render(text) if fmt in STYLES else render_whole(text, fmt), " \n", ""):
            assert shows_something(out, fmt) == bool(shown_text(out, fmt).strip()), (fmt, out)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(st.sampled_from(["", "a", "<b>x</b>", "&amp;", "😀", " \n", "<i></i>"]), st.sampled_from(MARKUPS)),
        max_size=30,
    ),
    st.integers(1, 4),
)
def test_the_facts_of_measured_blocks_are_what_measuring_them_says_whatever_was_forgotten(
    queries: list[tuple[str, TextFormat]], max_parts: int
) -> None:
    facts = _PartFacts(max_parts)
    for part, fmt in queries:
        for unit in MEASURES.values():
            assert facts(part, fmt, unit) == part_facts(part, fmt, unit) == facts(part, fmt, unit), (part, fmt)


def test_every_cached_run_shares_the_key_of_its_writing_per_style_and_wraps() -> None:
    # A key per run was a tuple more for the garbage collector to walk for as long as the run is cached.
    Writer(STYLES[TextFormat.SLACK_MRKDWN]()).render("**a `x`** and *b*\n\n**c `y`** and *d*\n")
    runs = [inline_tokens(parser_without_references(), f"**{w} `{c}`** and *{e}*") for w, c, e in ("axb", "cyd")]
    keys = [list(run.written) for run in runs]
    assert keys[0] and len(keys[0]) == len(keys[1])
    assert all(a is b for a, b in zip(keys[0], keys[1], strict=True))
