"""The parse's short cuts give markdown-it's own answer (docs/delivery.md, "Formatting cost").

Each one skips work markdown-it would do for a text it can tell in advance how markdown-it
reads; each is compared here with what markdown-it does, on generated text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.common import normalize_url
from markdown_it.rules_core import StateCore, text_join
from markdown_it.token import Token

from agentstream.config import TextFormat
from agentstream_delivery.formatting import STYLES
from agentstream_delivery.formatting.simple_blocks import simple_block_tokens
from agentstream_delivery.formatting.simple_inline import simple_run_tokens
from agentstream_delivery.formatting.tree import (
    PLAIN_URL,
    SETEXT_UNDERLINE,
    InlineRuns,
    Writer,
    inline_tokens,
    join_blocks,
    nest,
    normalized_link,
    parsed_inline_tokens,
    parser,
    parser_for_plain_blocks,
    parser_without_references,
    tokens,
)
from agentstream_delivery.formatting.web_html import (
    _image_as_link,
    _web_markdown,
    _WebMarkdown,
    _WebRenderer,
    html_blocks,
    render_html,
    web_parser_without_references,
)
from tests.unit.delivery.formatting.test_incremental import markdown

# Every character an inline rule starts at, beside words, spaces, line ends and characters beyond ASCII.
INLINE_ALPHABET = "ab Z09 .,;?()'\"/\n\t\u00a0é😀👍🏽" + "!#$%&*+-:<=>@[\\]^_`{|}~"


def as_dicts(md_tokens: list[object]) -> list[dict[str, object]]:
    return [t.as_dict() for t in md_tokens]  # type: ignore[attr-defined]


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=INLINE_ALPHABET, max_size=40) | st.text(max_size=20))
@example("")
@example("Step 1")
@example("handles 👍🏽 and 🇩🇪")
@example("two  \nlines")  # a line end is a rule's: never the short cut
@example("a\\*b* &amp; c")  # an escape and an entity: `text_join` has text_special tokens to join
@example("![a \\* b](x) &copy;")  # and inside an image's alt
def test_an_inline_run_is_tokenized_as_markdown_it_tokenizes_it(content: str) -> None:
    for md in (parser_without_references(), parser(), web_parser_without_references()):
        inline_tokens.cache_clear()
        expected = as_dicts(markdown_its_inline_tokens(md, content))
        assert as_dicts(inline_tokens(md, content)) == as_dicts(parsed_inline_tokens(md, content)) == expected, content


def markdown_its_inline_tokens(md: MarkdownIt, content: str) -> list[Token]:
    """An inline run's tokens as markdown-it's `inline` and `text_join` core rules leave them, every rule run."""
    children: list[Token] = []
    md.inline.parse(content, md, {}, children)
    holder = Token("inline", "", 0, content=content, children=children)
    text_join(StateCore(content, md, {}, [holder]))
    return holder.children or []


# Lines of every block construct, and lines a setext heading or a table could be made of, alone or after a quote mark.
BLOCK_LINES = [
    "para words",
    "*emph* and `code`",
    "",
    "---",
    "===",
    "  --  ",
    "- ---",
    "- item",
    "  - nested",
    "1. one",
    "2) two",
    "> quoted",
    ">---",
    "> ===",
    "# heading",
    "***",
    "```",
    "~~~py",
    "    indented",
    "\tcode",
    "| a | b |",
    "|---|---|",
    "a | b",
    "-- | --",
    "[ref]: https://x.org",
    "<div>",
]
block_texts = st.lists(
    st.sampled_from(BLOCK_LINES).map(lambda line: line + "\n") | st.text(alphabet="ab-=|> \t\n*`", max_size=6),
    max_size=24,
).map("".join)


@pytest.mark.timeout(60)  # a few seconds alone; the machine's other suites slow it
@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(block_texts)
@example("foo\n---\n")  # a setext heading: not for the plain blocks' parser
@example("> foo\n> ===\n")
@example("- foo\n  ---\n")
@example("foo\n- ===\n")  # a list item after a paragraph, no underline
def test_a_text_without_tables_or_setext_underlines_parses_alike_without_their_rules(text: str) -> None:
    # `tokens` takes the parser without the `table` and `lheading` rules only where neither can match: the tokens
    # are then the full parser's (and the text is read the same, block by block, whichever parser it takes).
    expected = as_dicts(parser_without_references().parse(text))
    if "]:" not in text and "|" not in text and "\r" not in text and SETEXT_UNDERLINE.search(text) is None:
        assert as_dicts(parser_for_plain_blocks().parse(text)) == expected, text
    tokens.cache_clear()
    assert as_dicts(tokens(text)) == as_dicts((parser() if "]:" in text else parser_without_references()).parse(text))


def test_the_plain_blocks_parser_is_taken_for_text_with_no_table_or_underline_line() -> None:
    assert SETEXT_UNDERLINE.search("a\n- ===\n- b\n") is None
    for underlined in ("a\n---", "a\n  ===  \n", "> a\n> --\n", "> a\n>\t==\n"):
        assert SETEXT_UNDERLINE.search(underlined) is not None, underlined
    # They share one inline parser: a run parsed through one is remembered for the other.
    assert parser_for_plain_blocks().inline is parser_without_references().inline


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.from_regex(PLAIN_URL, fullmatch=True))
@example("https://man7.org/sort.1")
@example("http://EXAMPLE.com/a/b?x=1&y=2#frag")
def test_a_plain_link_target_is_one_markdown_it_writes_back_as_it_is(url: str) -> None:
    assert normalize_url.normalizeLink(url) == url


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet="htps:/.%xn-é😀AZaz09?#&=[]()@ ", max_size=30) | st.from_regex(PLAIN_URL, fullmatch=True))
@example("https://xn--d1acufc.xn--p1ai/%D0%B0")
@example("https://пример.рф/путь")
@example("https://x:0:1")
def test_a_link_target_is_normalized_as_markdown_it_normalizes_it(url: str) -> None:
    normalized_link.cache_clear()
    assert normalized_link(url) == normalize_url.normalizeLink(url) == normalized_link(url)


STOCK = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["strikethrough", "table"])


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(markdown)
@example("# Step 1\n\nThe **fastest** way is _usually_ `sort -u` (see [the manual](https://man7.org/sort.1)).\n")
@example("**x** [a](https://x.org)\n\n# **x** [a](https://x.org)\n")  # one run inside two sets of wraps
def test_every_markup_is_written_as_from_markdown_its_own_parse(text: str) -> None:
    """The inline runs cached by their text (their tokens, tree and writing per style and wraps) and the link
    targets normalized once write what a stock markdown-it parse walked afresh writes, each time."""
    stock = nest(STOCK.parse(text))
    for fmt, style in STYLES.items():
        expected = join_blocks([Writer(style()).block(node) for node in stock])
        for _ in range(2):  # the second from what the first cached
            assert Writer(style()).render(text) == expected, (fmt, text)
    whole = render_html(text)  # the page's parser with references: no cached runs
    for _ in range(2):
        assert "".join(b.text for b in html_blocks(text)).rstrip("\n") == whole, (TextFormat.HTML, text)


def _link_open_of_a_copy(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """The page's link tag as markdown-it writes a copy of the token with the page's attributes added."""
    token = tokens[idx]
    shown = token.copy(attrs={**token.attrs, "rel": "noopener noreferrer", "target": "_blank"})
    return str(self.renderToken([shown], 0, options, env))


COPYING = _WebMarkdown("commonmark", {"html": False, "breaks": True}, renderer_cls=_WebRenderer)
COPYING.enable(["strikethrough", "table"])
COPYING.add_render_rule("image", _image_as_link)
COPYING.add_render_rule("link_open", _link_open_of_a_copy)
LINK = st.builds(
    "[{}]({}{})".format,
    st.text(alphabet="ab *_`&<>\"'", max_size=8),
    st.sampled_from(["https://", "http://", "mailto:", "tg://", "ftp://", "javascript:", ""]),
    st.text(alphabet="ab.&<>\"'%/?=#()é😀 ", max_size=16),
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(LINK | markdown, min_size=1, max_size=4).map(" ".join))
@example('[a "b" & <c>](https://x.org/?q="1"&r=<2>)')
@example('see <https://x.org/a&b> and [x](https://x.org "a title")')
def test_the_pages_link_tag_is_what_markdown_it_writes_for_a_copy_of_the_token(text: str) -> None:
    """The page's link tag is written without copying the token (`web_html._link_open`): byte for byte what
    markdown-it's `renderToken` writes of a copy with the page's attributes added."""
    assert _web_markdown().render(text) == COPYING.render(text), text
    assert render_html(text) == COPYING.render(text).rstrip("\n"), text


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.sampled_from(["a", "**a**", "`x`", "[a](https://x.org)", "", "b *c*"]), max_size=12), st.integers(1, 3)
)
def test_remembered_runs_are_the_parsers_own_whatever_was_forgotten(contents: list[str], max_runs: int) -> None:
    runs = InlineRuns(max_runs)
    for content in contents:
        for md in (parser_without_references(), web_parser_without_references()):
            expected = as_dicts(parsed_inline_tokens(md, content))
            assert as_dicts(runs(md, content)) == expected == as_dicts(runs(md, content)), content


# Pieces of the constructs the one-scan path takes (and of those it leaves to markdown-it), joined at random: marker
# runs beside words, spaces and punctuation of both kinds (flanking), code spans, links and what only looks like one.
SIMPLE_PIECES = st.sampled_from(
    [
        "a",
        "b2",
        "é",
        " ",
        "  ",
        "\u00a0",
        ".",
        ",",
        "(",
        ")",
        "!",
        "—",
        "。",
        "👍🏽",
        ":",
        "-",
        "]",
        "[",
        "*",
        "**",
        "***",
        "_",
        "__",
        "~",
        "~~",
        "~~~",
        "`",
        "``",
        "` `",
        "`x`",
        "``a`b``",
        "[a](https://x.org)",
        "[the manual](https://man7.org/sort.1)",
        "[](https://x.org)",
        "[a b](x*y_z~)",
        "[a](javascript:x)",
        "[a] (x)",
        "[a]",
        "[*a*](x)",
        "[a](x y)",
        "[a](<x>)",
        "[a](x(y))",
        "[é](https://é.org/ü)",
        "\\*",
        "&amp;",
        "<b>",
        "\n",
        "![a](x)",
    ]
)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(SIMPLE_PIECES, max_size=14).map("".join) | st.text(alphabet=INLINE_ALPHABET, max_size=30))
@example("The **fastest** way 3 is _usually_ `sort -u` (see [the manual](https://man7.org/sort.3)).")
@example("keeps ~~duplicates~~ *once* (1)")
@example("**a** b")  # `**`'s outer marker: an empty text token where no text joins it
@example("a **b**")
@example("**a *b* c** _d_")
@example("*a **b* c**")  # crossed: markdown-it's
@example("snake_case and a_b_c")  # `_` within a word neither opens nor closes
@example("a*b*c")  # `*` within a word both opens and closes: markdown-it's
def test_a_simple_run_is_tokenized_in_one_scan_as_markdown_it_tokenizes_it(content: str) -> None:
    for md in (parser_without_references(), web_parser_without_references()):
        simple = simple_run_tokens(md, content)
        if simple is not None:
            assert as_dicts(simple) == as_dicts(markdown_its_inline_tokens(md, content)), content


def test_the_one_scan_takes_the_runs_answers_are_mostly_made_of() -> None:
    """Not a test of output (the one above is): that the path is taken where it is meant to be, and not elsewhere."""
    md = parser_without_references()
    for taken in (
        "The **fastest** way is _usually_ `sort -u` (see [the manual](https://man7.org/sort)).",
        "a ~~b~~ *c*",
    ):
        assert simple_run_tokens(md, taken) is not None, taken
    for declined in ("a\nb", "a \\* b", "&amp;", "<https://x.org>", "![a](x)", "***a***", "a*b*c", "*a **b* c**"):
        assert simple_run_tokens(md, declined) is None, declined
    assert simple_run_tokens(parser(), "**a**") is not None  # the same rules: references are a block matter


# Lines of the shapes the one-pass block reader takes (and of those it leaves to markdown-it): paragraphs, headings,
# fences, bullet items, and lines markdown-it reads as something else (quotes, rules, ordered items, indents).
SIMPLE_BLOCK_LINES = st.sampled_from(
    ["para words", "*emph* and `code`", "", "", "- item", "- *b* c", "* star", "+ plus", "-  two", "- ", "-", "# h"]
    + ["## h2 ", "# h #", "#", "####### x", "```", "```sh", "``` a`b", "~~~", "~~~~ py", "````", " ```", "   ```"]
    + ["    ```", " one space", "  two", "    four", "1. one", "2) two", "1.5 x", "> q", "***", "---", "- - -"]
    + ["_ _ _", "**bold** x", "__x__", "text #", "\u00a0nbsp", "é x", "- \u00a0x", "#\u00a0x", "<div>", "x  ", "   "]
    + ["- --", "* **", "+ a", "* a"]
) | st.text(alphabet="ab -*+_#`~>1.)\u00a0", max_size=6)  # and short lines of the characters blocks start with


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.tuples(st.lists(SIMPLE_BLOCK_LINES, max_size=10).map("\n".join), st.sampled_from(["", "\n", " ▉", "\n ▉"])).map(
        "".join
    )
)
@example(
    "## Step 1\n\nThe **fastest** way is `sort -u`.\n\n- keeps *once*\n- handles 👍🏽\n\n```sh\nsort -u\n```\n\n ▉"
)
@example("- a\n\n")  # the last item takes the blank line in
@example("- a\n* b\n\n+ c")  # another marker: another list
@example("text\n- item\n```\ncode")  # a bullet item and a fence interrupt a paragraph; the fence runs to the end
@example("- a\n\n- b")  # a loose list: markdown-it's
@example("- a\nlazy")  # the item's lazy line: markdown-it's
@example("- --")  # a thematic break, not an item: found by the test of the plain blocks' parser
@example("* **\n- a\n- --")
def test_a_simple_text_is_read_in_one_pass_as_markdown_it_reads_it(text: str) -> None:
    md = parser_for_plain_blocks()
    if "|" in text or SETEXT_UNDERLINE.search(text):
        return  # the parser stood for is not this text's (`tree.tokens`)
    simple = simple_block_tokens(md, text, inline_tokens)
    if simple is not None:
        assert as_dicts(simple) == as_dicts(md.parse(text)), text


def test_the_one_pass_takes_the_texts_answers_are_mostly_made_of() -> None:
    """Not a test of output (the one above is): that the pass is taken where it is meant to be, and not elsewhere."""
    md = parser_for_plain_blocks()
    for taken in ("## Step\n\nwords *a*\n\n- x\n- y\n\n```sh\nls\n```\n", "text\n- item\n", "a\n\n ▉"):
        assert simple_block_tokens(md, taken, inline_tokens) is not None, taken
    for declined in ("> q", "1. a", "- a\n  - b", "- a\n\n- b", "a\n\n\nb", "a\tb", "    code", "***", "# h #", "- --"):
        assert simple_block_tokens(md, declined, inline_tokens) is None, declined
    assert simple_block_tokens(parser_without_references(), "a", inline_tokens) is None  # another parser's rules
