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
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from agentstream_delivery.formatting import tree
from agentstream_delivery.formatting.incremental import Block
from agentstream_delivery.formatting.styles import openable
from agentstream_delivery.formatting.tree import Run, cached_inline, written_key


def _image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = html.escape(token.content or src)
    if not openable(src):
        return alt
    return f'<a href="{html.escape(src, quote=True)}" rel="noopener noreferrer" target="_blank">{alt}</a>'


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    # The token may be a cached parse's, which other renderings read: its attributes are not changed.
    token = tokens[idx]
    attrs = {**token.attrs, "rel": "noopener noreferrer", "target": "_blank"}
    if token.block or token.hidden or token.nesting != 1:  # never a link's; what `renderToken` of a copy writes
        return str(self.renderToken([token.copy(attrs=attrs)], 0, options, env))
    # `renderToken` of an inline opening tag, without copying the token (a dataclass copy cost a tenth of a link)
    return f"<{token.tag}{self.renderAttrs(_Attributes(attrs))}>"


class _Attributes:
    """What `RendererHTML.renderAttrs` reads of a token."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def attrItems(self) -> list[tuple[str, Any]]:  # noqa: N802 (markdown-it's name)
        return list(self.attrs.items())


class _WebRenderer(RendererHTML):
    """markdown-it's HTML renderer; an inline run whose tokens depend on its text alone (`tree.Run`) is written
    once (a stream's frames render the block being written again). Every web parser has the same rules."""

    def renderInline(self, tokens: Sequence[Token], options: OptionsDict, env: EnvType) -> str:  # noqa: N802
        if not isinstance(tokens, Run):
            return super().renderInline(tokens, options, env)
        written = tokens.written.get(_WEB_KEY)
        if written is None:
            written = tokens.written[_WEB_KEY] = super().renderInline(tokens, options, env)
        return written


_WEB_KEY = written_key(_WebRenderer, ())


class _WebMarkdown(tree.LinkMemoMarkdown):
    def validateLink(self, url: str) -> bool:  # noqa: N802 (markdown-it's name)
        return openable(url.strip())  # relative and script links stay text


def _web_markdown() -> MarkdownIt:
    md = _WebMarkdown("commonmark", {"html": False, "breaks": True}, renderer_cls=_WebRenderer)
    md.enable(["strikethrough", "table"])
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
    env: dict[str, Any] = {}
    shared = tree.tokens(text) if "]:" not in text else None
    if shared is not None and _read_alike(shared):
        md, tokens = web_parser_without_references(), shared
    else:
        md = web_parser_without_references() if "]:" not in text else web_parser()
        tokens = md.parse(text, env)
    starts = [i for i, t in enumerate(tokens) if t.level == 0 and t.nesting >= 0]
    ends = [*starts[1:], len(tokens)] if starts else []
    return [
        Block.at(tokens[a].map, tokens[a].type.removesuffix("_open"), md.renderer.render(tokens[a:b], md.options, env))
        for a, b in zip(starts, ends, strict=True)
    ]


def _read_alike(tokens: Sequence[Token]) -> bool:
    """Whether the web's parser reads the text these tokens are `tree`'s parse of into the same tokens.

    The two differ only in which link targets they accept: the tree's every one markdown-it accepts (a chat
    shows the others as text), the web's only those a browser may open. Where every link and image the tree
    found is one the web's accepts too, the web's parser made the same decisions (it rejects no target the
    tree's accepted, and accepts none the tree's rejected): one parse serves the page's HTML and the plain
    fallback the length check measures with it."""
    for token in tokens:
        if token.type == "inline" and token.children and not _openable_links(token.children):
            return False
    return True


def _openable_links(children: Sequence[Token]) -> bool:
    for child in children:
        if child.type == "link_open" and not openable(str(child.attrs.get("href", "")).strip()):
            return False
        if child.type == "image" and (
            not openable(str(child.attrs.get("src", "")).strip()) or not _openable_links(child.children or [])
        ):
            return False
    return True
