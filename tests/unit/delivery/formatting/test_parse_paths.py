"""The parse's short cuts give markdown-it's own answer (docs/delivery.md, "Formatting cost").

Each one skips work markdown-it would do for a text it can tell in advance how markdown-it
reads; each is compared here with what markdown-it does, on generated text.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it.common import normalize_url

from agentstream_delivery.formatting.tree import (
    PLAIN_URL,
    inline_tokens,
    normalized_link,
    parsed_inline_tokens,
    parser,
    parser_without_references,
)
from agentstream_delivery.formatting.web_html import web_parser_without_references

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
def test_an_inline_run_is_tokenized_as_markdown_it_tokenizes_it(content: str) -> None:
    for md in (parser_without_references(), parser(), web_parser_without_references()):
        inline_tokens.cache_clear()
        assert as_dicts(inline_tokens(md, content)) == as_dicts(parsed_inline_tokens(md, content)), content


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
