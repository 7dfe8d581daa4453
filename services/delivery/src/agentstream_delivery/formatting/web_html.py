"""The web chat page's HTML: markdown-it's own renderer with raw HTML off.

Everything the model wrote is escaped; the only tags are the renderer's (p, strong,
em, s, code, pre, a, ul, ol, li, blockquote, h1-h6, hr, table, br). Links are kept only
for schemes a browser may open safely (`styles.openable`); an image becomes a link to it,
so a page never fetches what a model named.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from agentstream_delivery.formatting.incremental import Block
from agentstream_delivery.formatting.styles import openable
from agentstream_delivery.formatting.tree import cached_inline


def _image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = html.escape(token.content or src)
    if not openable(src):
        return alt
    return f'<a href="{html.escape(src, quote=True)}" rel="noopener noreferrer" target="_blank">{alt}</a>'


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", "noopener noreferrer")
    tokens[idx].attrSet("target", "_blank")
    return str(self.renderToken(tokens, idx, options, env))


class _WebMarkdown(MarkdownIt):
    def validateLink(self, url: str) -> bool:  # noqa: N802 (markdown-it's name)
        return openable(url.strip())  # relative and script links stay text


def _web_markdown() -> MarkdownIt:
    md = _WebMarkdown("commonmark", {"html": False, "breaks": True}).enable(["strikethrough", "table"])
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("link_open", _link_open)
    return md


@lru_cache(maxsize=1)
def web_parser() -> MarkdownIt:
    return _web_markdown()


@lru_cache(maxsize=1)
def web_parser_without_references() -> MarkdownIt:
    """`web_parser()` for a text with no `]:`, its inline runs cached by their text (`tree.inline_tokens`: a
    stream's frames parse the block being written again). Its render rules only add the same attributes again
    to a cached link, so a cached run renders as a new one."""
    md = _web_markdown().disable(["reference", "text_join"])
    md.core.ruler.at("inline", cached_inline)
    return md


def render_html(text: str) -> str:
    return web_parser().render(text).rstrip("\n")


def html_blocks(text: str) -> list[Block]:
    """Each top-level block's HTML, with its lines: joined, they are `render_html(text)` before its rstrip."""
    md = web_parser_without_references() if "]:" not in text else web_parser()
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    starts = [i for i, t in enumerate(tokens) if t.level == 0 and t.nesting >= 0]
    ends = [*starts[1:], len(tokens)] if starts else []
    return [
        Block.at(tokens[a].map, tokens[a].type.removesuffix("_open"), md.renderer.render(tokens[a:b], md.options, env))
        for a, b in zip(starts, ends, strict=True)
    ]
