"""Golden renderings: one Markdown text, each platform's markup, checked by that platform's rules."""

from __future__ import annotations

import re
import string

import mdurl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstream.config import TextFormat
from agentstream_delivery.adapters.discord import CAPABILITIES as DISCORD
from agentstream_delivery.adapters.slack import CAPABILITIES as SLACK
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.formatting import plain, render
from agentstream_delivery.formatting.styles import DiscordMarkdownStyle
from agentstream_delivery.formatting.tree import parser, readable_url, reads_back
from agentstream_testing.fake_platforms.telegram_html import parse as telegram_parse
from tests.unit.delivery.formatting.platform_rules import accepts

TG, SL, DC, PL, WEB = (
    TextFormat.TELEGRAM_HTML,
    TextFormat.SLACK_MRKDWN,
    TextFormat.DISCORD_MARKDOWN,
    TextFormat.PLAIN,
    TextFormat.HTML,
)
HEADINGS = "# Title\n\n## Sub *it*\n\n#### Deep"
LISTS = "- one\n- two\n  - nested\n\n3. three\n4. four"
LINKS = "See [the docs](https://example.com/a_(b)?x=1&y=2) or <https://example.com> and [local](./x)."
NESTED = "***both*** and **bold _it ~~gone~~_** and `a<b>&c`"
EMOJI = "**👍🏽 ok** 👨\u200d👩\u200d👧 🇩🇪 _é_"
QUOTE = "> quoted **x**\n> more"

GOLDEN: list[tuple[str, TextFormat, str]] = [
    (HEADINGS, TG, "<b>Title</b>\n\n<b>Sub <i>it</i></b>\n\n<b>Deep</b>"),
    (HEADINGS, SL, "*Title*\n\n*Sub _it_*\n\n*Deep*"),
    (HEADINGS, DC, "# Title\n\n## Sub *it*\n\n**Deep**"),  # Discord has three heading levels
    (HEADINGS, PL, "Title\n\nSub it\n\nDeep"),
    (HEADINGS, WEB, "<h1>Title</h1>\n<h2>Sub <em>it</em></h2>\n<h4>Deep</h4>"),
    (LISTS, TG, "• one\n• two\n  ◦ nested\n\n3. three\n4. four"),
    (LISTS, SL, "• one\n• two\n  ◦ nested\n\n3. three\n4. four"),
    (LISTS, DC, "- one\n- two\n  - nested\n\n3. three\n4. four"),
    (LISTS, PL, "• one\n• two\n  ◦ nested\n\n3. three\n4. four"),
    (
        LISTS,
        WEB,
        '<ul>\n<li>one</li>\n<li>two\n<ul>\n<li>nested</li>\n</ul>\n</li>\n</ul>\n<ol start="3">\n'
        "<li>three</li>\n<li>four</li>\n</ol>",
    ),
    (
        LINKS,
        TG,
        'See <a href="https://example.com/a_(b)?x=1&amp;y=2">the docs</a> or '
        '<a href="https://example.com">https://example.com</a> and local (./x).',
    ),
    (LINKS, SL, "See <https://example.com/a_(b)?x=1&y=2|the docs> or <https://example.com> and local (./x)."),
    (LINKS, DC, "See [the docs](https://example.com/a_%28b%29?x=1&y=2) or <https://example.com> and local (./x)."),
    (LINKS, PL, "See the docs (https://example.com/a_(b)?x=1&y=2) or https://example.com and local (./x)."),
    (
        LINKS,
        WEB,
        '<p>See <a href="https://example.com/a_(b)?x=1&amp;y=2" rel="noopener noreferrer" target="_blank">the docs</a>'
        ' or <a href="https://example.com" rel="noopener noreferrer" target="_blank">https://example.com</a>'
        " and [local](./x).</p>",
    ),
    (NESTED, TG, "<i><b>both</b></i> and <b>bold <i>it <s>gone</s></i></b> and <code>a&lt;b&gt;&amp;c</code>"),
    (NESTED, SL, "_*both*_ and *bold _it ~gone~_* and `a&lt;b&gt;&amp;c`"),
    (NESTED, DC, "***both*** and **bold *it ~~gone~~*** and `a<b>&c`"),
    (NESTED, PL, "both and bold it gone and a<b>&c"),
    (
        NESTED,
        WEB,
        "<p><em><strong>both</strong></em> and <strong>bold <em>it <s>gone</s></em></strong> and "
        "<code>a&lt;b&gt;&amp;c</code></p>",
    ),
    (EMOJI, TG, "<b>👍🏽 ok</b> 👨\u200d👩\u200d👧 🇩🇪 <i>é</i>"),
    (EMOJI, SL, "*👍🏽 ok* 👨\u200d👩\u200d👧 🇩🇪 _é_"),
    (EMOJI, DC, "**👍🏽 ok** 👨\u200d👩\u200d👧 🇩🇪 *é*"),
    (EMOJI, PL, "👍🏽 ok 👨\u200d👩\u200d👧 🇩🇪 é"),
    (EMOJI, WEB, "<p><strong>👍🏽 ok</strong> 👨\u200d👩\u200d👧 🇩🇪 <em>é</em></p>"),
    (QUOTE, TG, "<blockquote>quoted <b>x</b>\nmore</blockquote>"),
    (QUOTE, SL, "&gt; quoted *x*\n&gt; more"),
    (QUOTE, DC, "> quoted **x**\n> more"),
    (QUOTE, PL, "> quoted x\n> more"),
]


@pytest.mark.parametrize(("markdown", "fmt", "expected"), GOLDEN)
def test_each_platform_gets_its_own_markup(markdown: str, fmt: TextFormat, expected: str) -> None:
    assert render(markdown, fmt) == expected
    accepts(fmt, expected, 100_000)


def test_code_fences_keep_their_language_where_the_platform_has_one() -> None:
    md = '```python\nprint("<hi>")\n```'
    assert render(md, TG) == '<pre><code class="language-python">print("&lt;hi&gt;")</code></pre>'
    assert render(md, SL) == '```\nprint("&lt;hi&gt;")\n```'
    assert render(md, DC) == '```python\nprint("<hi>")\n```'
    assert render(md, PL) == 'print("<hi>")'


def test_the_models_own_html_is_text_everywhere() -> None:
    md = "<script>alert(1)</script> <b>x</b> [a](javascript:alert(1))"
    assert render(md, TG) == "&lt;script&gt;alert(1)&lt;/script&gt; &lt;b&gt;x&lt;/b&gt; [a](javascript:alert(1))"
    assert "<script" not in render(md, WEB) and "href" not in render(md, WEB)
    assert render(md, DC).startswith(r"\<script\>")


def test_discord_escapes_its_markup_characters_but_not_inside_a_bare_url() -> None:
    md = r"see https://example.com/a_b_c?x=(1) and a\_b \*not bold\* <y>"
    assert render(md, DC) == r"see https://example.com/a_b_c?x=(1) and a\_b \*not bold\* \<y\>"


def test_telegram_never_nests_what_the_bot_api_refuses() -> None:
    cases = {
        "> outer\n> > inner": "<blockquote>outer\n\ninner</blockquote>",
        "[![logo](https://x.io/l.png)](https://x.io)": '<a href="https://x.io">logo</a>',
        "# a **b** c": "<b>a b c</b>",
        "**a **b** c**": "<b>a b c</b>",
    }
    for md, expected in cases.items():
        assert render(md, TG) == expected
        telegram_parse(expected)


def test_an_unclosed_construct_still_renders_to_complete_markup() -> None:
    assert render("```py\nx = 1", TG) == '<pre><code class="language-py">x = 1</code></pre>'
    assert render("**bold and `co", TG) == "**bold and `co"  # literal until the stream closes it
    assert render("[link](https://x.io", TG) == "[link](https://x.io"
    assert render("```", TG) == "```"  # would render to an empty message: the text itself instead


def test_the_length_is_what_the_platform_counts() -> None:
    # Telegram counts the text after its HTML is parsed, in UTF-16 code units; never less than the plain fallback.
    assert TELEGRAM.length()("**😀**") == 2
    assert TELEGRAM.length()("[x](https://example.com)") == len(plain("[x](https://example.com)"))
    assert SLACK.length()("a & b") == len("a &amp; b")
    assert DISCORD.length()("**b**") == len("**b**")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab #>+-\\*_~`|<>[]()https:/.x\n", max_size=40))
def test_discord_escapes_every_markdown_character_outside_bare_urls_and_leaves_other_text_as_it_is(s: str) -> None:
    # What Discord's text escaping does, spelled out: a run with nothing to escape is returned as it is.
    parts = re.split(r"(https?://[^\s<>\\`]+)", s)
    escaped = "".join(p if i % 2 else re.sub(r"([\\*_~`|<>\[\]()])", r"\\\1", p) for i, p in enumerate(parts))
    assert DiscordMarkdownStyle().text(s) == re.sub(r"^([#>+-])", r"\\\1", escaped)


TARGETS = st.sampled_from(["", "https://", "http://", "mailto:", "//", "tg://", "HTTP://", "ftp://", "0:", "a:"])


@settings(max_examples=2000, deadline=None)
@given(TARGETS, st.text(alphabet=string.printable + "üé😀", max_size=30))
def test_a_link_target_is_read_as_markdown_it_decodes_it(scheme: str, rest: str) -> None:
    # Every target a parse holds is `normalizeLink`'s; the plain ones skip decoding, and must read the same.
    href = parser().normalizeLink(scheme + rest)
    if reads_back(href):
        assert readable_url(href) == parser().normalizeLinkText(href)
    else:  # markdown-it's own reading would reorder it
        assert readable_url(href) == mdurl.decode(href, mdurl.DECODE_DEFAULT_CHARS + "%")


@pytest.mark.parametrize(
    ("href", "read"),
    [
        ("https://:0:1", "https://:0:1"),  # found by the property above: markdown-it reads `https://:1:0`
        ("https://x:0:1/%C3%A9", "https://x:0:1/é"),
        ("https://x:8/%C3%A9", "https://x:8/é"),
        ("https://xn--d1acpjx3f.xn--p1ai/", "https://яндекс.рф/"),
    ],
)
def test_a_link_target_reads_as_the_model_wrote_it(href: str, read: str) -> None:
    assert readable_url(href) == read
