"""The fake Bot API's `parse_mode: HTML` check refuses what the real one refuses, and counts what it shows."""

from __future__ import annotations

import pytest

from agentstream_testing.fake_platforms.telegram_html import TAGS, HtmlRejected, parse


def test_the_supported_tags_parse_to_their_text() -> None:
    markup = (
        '<b>a</b> <i>b <u>c</u></i> <s>d</s> <span class="tg-spoiler">e</span> <a href="https://x.io?a=1&amp;b">f</a> '
        '<code>g</code> <pre><code class="language-py">h &lt;i&gt;</code></pre> <blockquote>j</blockquote> &#128512;'
    )
    assert parse(markup) == "a b c d e f g h <i> j 😀"


@pytest.mark.parametrize(
    ("markup", "reason"),
    [
        ("<b>open", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<b><i>x</b></i>", "Unmatched end tag"),
        ("a < b", "Unexpected character"),
        ("fish & chips", "Unsupported HTML entity"),
        ("&nbsp;", "Unsupported HTML entity"),
        ("<p>x</p>", 'Unsupported start tag "p"'),
        ("<code><b>x</b></code>", 'Can\'t nest "b" inside "code"'),
        ("<a>x</a>", "Empty URL"),
        ('<a href="https://a"><a href="https://b">x</a></a>', 'Nested "a"'),
        ("<blockquote><blockquote>x</blockquote></blockquote>", 'Nested "blockquote"'),
        ("<span>x</span>", "tg-spoiler"),
    ],
)
def test_what_the_bot_api_refuses_is_refused(markup: str, reason: str) -> None:
    with pytest.raises(HtmlRejected, match=reason.replace("(", r"\(")):
        parse(markup)


def test_a_bot_api_without_a_tag_refuses_it() -> None:
    assert parse("<blockquote>x</blockquote>") == "x"
    with pytest.raises(HtmlRejected, match='Unsupported start tag "blockquote"'):
        parse("<blockquote>x</blockquote>", TAGS - {"blockquote"})
