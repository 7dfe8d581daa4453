"""One Markdown parse, walked into a platform's markup by a `Style`.

The model's Markdown is parsed once by markdown-it-py (CommonMark, raw HTML off, plus
strikethrough and tables; the shapes most answers are made of are read to the same tokens
by one pass, `simple_blocks.py` and `simple_inline.py`); `Writer` walks the syntax tree and
asks its `Style` how each construct is written. Every construct a style opens it also
closes, so any text, a cut off prefix of a stream included, renders to complete markup: a
fence still open is a code block that runs to the end, an emphasis never closed stays
literal text.
Lists, quotes, rules and tables are laid out here, the same on every platform.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import mdurl
from markdown_it import MarkdownIt
from markdown_it.common import normalize_url
from markdown_it.parser_inline import ParserInline
from markdown_it.rules_core import StateCore, text_join
from markdown_it.token import Token

from agentstream_delivery.formatting.incremental import Block
from agentstream_delivery.formatting.simple_blocks import simple_block_tokens
from agentstream_delivery.formatting.simple_inline import simple_run_tokens

BULLETS = ("•", "◦", "▪")
RULE = "———"
MAX_NEST = 3  # lists and quotes nested deeper are not indented further (keeps lines short, lengths bounded)


@lru_cache(maxsize=1)
def parser() -> MarkdownIt:
    return _commonmark()


@lru_cache(maxsize=1)
def parser_without_references() -> MarkdownIt:
    """`parser()` for a text with no `]:`, where no reference definition can be: one rule fewer to try per line.

    Without references an inline run's tokens depend on its text alone, so they are cached: a stream's
    frames parse the block being written again, and its inline runs that did not change are not."""
    md = _commonmark().disable(["reference", "text_join"])
    md.core.ruler.at("inline", cached_inline)
    return md


@lru_cache(maxsize=1)
def parser_for_plain_blocks() -> MarkdownIt:
    """`parser_without_references()` for a text with no `|`, no carriage return and no line a setext heading could
    be underlined with (`SETEXT_UNDERLINE`): without the `table` and `lheading` rules, which for such a text only
    try every line (and `lheading` every paragraph's lines again, before the paragraph rule does) to answer no.

    Neither can match there: a table needs a `|` in its header line, and `lheading` a later line of the paragraph
    that is, after the indent and quote marks, only `-` or `=` then spaces; and failing, neither changes what the
    rules after them see (`lheading` leaves `parentType` at "paragraph", which the paragraph rule then sets and
    keeps itself, and which only a silent `list` check reads, after its caller set it). It shares
    `parser_without_references()`'s inline parser, so its cached runs too. (A property test compares both parses.)"""
    md = _commonmark().disable(["reference", "text_join", "table", "lheading"])
    md.core.ruler.at("inline", cached_inline)
    md.inline = parser_without_references().inline
    return md


# A line a setext heading's underline could be: after spaces, tabs and quote marks only `-` or `=`, then blanks.
SETEXT_UNDERLINE = re.compile(r"^[ \t>]*(?:-+|=+)[ \t]*$", re.MULTILINE)


def cached_inline(state: StateCore) -> None:
    """markdown-it's `inline` core rule, each run's tokens taken from `inline_tokens` (text_join included)."""
    for token in state.tokens:
        if token.type == "inline":
            token.children = inline_tokens(state.md, token.content)


class Run(list[Token]):
    """An inline run's tokens as `inline_tokens` caches them, with what was made of them once: their tree (`nest`)
    and the run as each style writes it inside each set of open wraps (`Writer`). Tokens that depend on the run's
    text alone are walked once however often a stream's frames parse the block being written again."""

    __slots__ = ("nodes", "written")

    def __init__(self, tokens: list[Token]) -> None:
        super().__init__(tokens)
        self.nodes: list[Node] | None = None
        self.written: dict[tuple[type, tuple[str, ...]], str] = {}  # by (writer's style or renderer, open wraps)


_WRITTEN_KEYS: dict[tuple[type, tuple[str, ...]], tuple[type, tuple[str, ...]]] = {}


def written_key(writer: type, wraps: tuple[str, ...]) -> tuple[type, tuple[str, ...]]:
    """The one key object of `Run.written` for a style (or renderer) inside a set of open wraps: every cached run
    shares it, instead of keeping a tuple of its own for the garbage collector to walk (docs/delivery.md)."""
    return _WRITTEN_KEYS.setdefault((writer, wraps), (writer, wraps))


def run_of(md: MarkdownIt, content: str) -> Run:
    """The inline tokens of `content` as markdown-it's `inline` and `text_join` rules leave them (read only).

    A run with none of the characters an inline rule starts at (`md.inline.terminator_re`: every rule but the
    text rule's needs one, and the text rule stops only at one) is one text token, as markdown-it makes it,
    without running the rules (a third of a stream's runs: a heading's words, a list item's; `parsed_inline_tokens`
    is the rules' answer, and a property test compares both). A run made of the simple constructs only (emphasis
    that pairs in order, code spans, plain links: most of the rest) is tokenized by one scan (`simple_inline.py`)."""
    if md.inline.terminator_re.search(content) is None:
        return Run([Token("text", "", 0, content=content)] if content else [])
    simple = simple_run_tokens(md, content)
    return Run(simple if simple is not None else parsed_inline_tokens(md, content))


class InlineRuns:
    """`run_of`, remembered per inline parser for the last `max_runs` runs (first in, first out), by their text
    alone: in a plain dict, not an `lru_cache`, whose key tuple and entry per run were two more objects for the
    garbage collector to walk for as long as the run is kept. Which runs are remembered never changes a result.
    (Parsers that share their inline parser, options and link handling share their runs.)"""

    def __init__(self, max_runs: int = 2048) -> None:
        self.max_runs = max_runs
        self._runs: dict[ParserInline, dict[str, Run]] = {}

    def cache_clear(self) -> None:
        self._runs.clear()

    def __call__(self, md: MarkdownIt, content: str) -> Run:
        known = self._runs.get(md.inline)
        if known is None:
            known = self._runs[md.inline] = {}
        run = known.get(content)
        if run is None:
            run = known[content] = run_of(md, content)
            if len(known) > self.max_runs:
                del known[next(iter(known))]
        return run


inline_tokens = InlineRuns()


def parsed_inline_tokens(md: MarkdownIt, content: str) -> list[Token]:
    """`inline_tokens` from markdown-it's inline rules, whatever `content` holds.

    `text_join` runs only where an escape (`\\`) or an entity (`&`) can have made a `text_special` token: without
    one it has nothing to do (the inline parse's own last rule, `fragments_join`, has already joined adjacent text;
    7% of a run's parse). tests/unit/delivery/formatting/test_parse_paths.py compares the tokens with markdown-it's
    own on generated text."""
    children: list[Token] = []
    md.inline.parse(content, md, {}, children)
    if "\\" not in content and "&" not in content:
        return children
    holder = Token("inline", "", 0, content=content, children=children)
    text_join(StateCore(content, md, {}, [holder]))
    return holder.children or []


class LinkMemoMarkdown(MarkdownIt):
    """markdown-it with its link targets normalized once per target (`normalized_link`)."""

    def normalizeLink(self, url: str) -> str:  # noqa: N802 (markdown-it's name)
        return normalized_link(url)


# An http(s) target of an ASCII host and a path, query and fragment of characters mdurl neither encodes nor reads
# apart: markdown-it's `normalizeLink` writes it back as it is (tests/unit/delivery/formatting/test_parse_paths.py
# checks this on targets generated from this pattern).
PLAIN_URL = re.compile(
    r"https?://[A-Za-z0-9][A-Za-z0-9.-]*(?:/[A-Za-z0-9._~/-]*)?(?:\?[A-Za-z0-9._~=&/-]*)?(?:#[A-Za-z0-9._~/-]*)?"
)


@lru_cache(maxsize=1024)
def normalized_link(url: str) -> str:
    """markdown-it's `normalizeLink` (a pure function of the target: parsed, punycoded, percent-encoded; ~20 µs,
    a fifth of a paragraph's inline parse), of a plain http(s) target at once (`PLAIN_URL`), of any other cached:
    a stream parses the block being written again at each frame, and its links with it."""
    if PLAIN_URL.fullmatch(url):
        return url
    return normalize_url.normalizeLink(url)


def _commonmark() -> MarkdownIt:
    # Raw HTML off: its two rules would only try every line and every `<` to answer no.
    md = LinkMemoMarkdown("commonmark", {"html": False, "breaks": True}).enable(["strikethrough", "table"])
    return md.disable(["html_block", "html_inline"])


class Node:
    """A node of the syntax tree: a block or inline construct and what it holds (markdown-it's tokens, nested)."""

    __slots__ = ("attrs", "children", "content", "hidden", "info", "map", "run", "tag", "type")

    def __init__(self, token: Token, type_: str, content: str, children: Sequence[Node] = ()) -> None:
        self.run: Run | None = None  # an inline run's cached tokens (`Run`), which its children are the tree of
        self.type = type_
        self.tag = token.tag
        self.attrs = token.attrs
        self.map = token.map
        self.info = token.info
        self.content = content
        self.hidden = token.hidden
        # Read only once nested. A leaf (most inline nodes) shares the empty tuple: a list each was a quarter of the
        # objects a chat's stream keeps in its caches, all of them for the garbage collector to walk.
        self.children: Sequence[Node] = children


def nest(tokens: list[Token]) -> list[Node]:
    """markdown-it's flat token stream as a tree: an `x_open` … `x_close` pair is one node `x`."""
    top: list[Node] = []
    stack = [top]
    for token in tokens:
        if token.nesting == 1:
            inner: list[Node] = []
            node = Node(token, token.type.removesuffix("_open"), token.content, inner)
            stack[-1].append(node)
            stack.append(inner)
        elif token.nesting == -1:
            if len(stack) > 1:
                stack.pop()
        else:
            node = Node(token, token.type, token.content)
            children = token.children
            if isinstance(children, Run):
                if children.nodes is None:
                    children.nodes = nest(children)
                node.children, node.run = children.nodes, children
            elif children:
                node.children = nest(children)
            stack[-1].append(node)
    return top


@lru_cache(maxsize=8)
def parse(text: str) -> list[Node]:
    """The top-level blocks of `text` (read only): cached, as a text is written for its platform and then as
    plain text (the length check measures both, one after the other)."""
    return nest(tokens(text))


@lru_cache(maxsize=8)
def tokens(text: str) -> list[Token]:
    """markdown-it's tokens of `text` (read only): what `parse` nests, and what the web's HTML renders when its
    parser would read the text alike (`web_html.py`). A text of the shapes `simple_blocks.py` reads (paragraphs,
    headings, fences, tight one-line bullet lists) gets the same tokens from one pass over its lines."""
    if "]:" in text:
        md = parser()
    elif "|" in text or "\r" in text or SETEXT_UNDERLINE.search(text):
        md = parser_without_references()
    else:
        md = parser_for_plain_blocks()
        simple = simple_block_tokens(md, text, inline_tokens)
        if simple is not None:
            return simple
    return md.parse(text)


def join_blocks(parts: list[str]) -> str:
    return "\n\n".join(p for p in parts if p).strip("\n")


class Style:
    """How one platform writes each construct; the defaults write plain text."""

    def text(self, s: str) -> str:
        return s

    def wrap(self, kind: str, inner: str) -> str:
        """`kind` is "strong", "em" or "s" (strikethrough)."""
        return inner

    def code(self, content: str) -> str:
        return content

    def link(self, href: str, inner: str, inner_plain: str) -> str:
        return inner if inner_plain == href or not href else f"{inner} ({href})"

    def heading(self, level: int, inner: str) -> str:
        return inner

    def code_block(self, lang: str, content: str) -> str:
        return content.rstrip("\n")

    def quote(self, inner: str) -> str:
        return "\n".join("> " + line if line else ">" for line in inner.split("\n"))

    def rule(self) -> str:
        return self.text(RULE)

    def bullet(self, depth: int, number: int | None) -> str:
        return f"{number}." if number is not None else BULLETS[depth % len(BULLETS)]


class Writer:
    """Walks one parse with a style; knows which inline wraps are open so none is nested in itself."""

    def __init__(self, style: Style) -> None:
        self.style = style
        self._open: list[str] = []
        self._list_depth = 0
        self._quote_depth = 0

    def render(self, text: str) -> str:
        return join_blocks([block.text for block in self.top_blocks(text)])

    def top_blocks(self, text: str) -> list[Block]:
        """Each top-level block as written, with its lines: `join_blocks` of their texts is `render(text)`."""
        return [Block.at(child.map, child.type, self.block(child)) for child in parse(text)]

    # -- blocks --------------------------------------------------------------------
    def blocks(self, node: Node, sep: str = "\n\n") -> str:
        parts = (self.block(child) for child in node.children)
        return sep.join(p for p in parts if p)

    def block(self, node: Node) -> str:
        match node.type:
            case "paragraph":
                return self.inlines(node)
            case "heading":  # already bold: a bold run inside adds nothing
                return self.style.heading(int(node.tag[1:]), self.within("strong", node, self.inlines))
            case "fence" | "code_block":
                return self.style.code_block(_language(node.info) if node.type == "fence" else "", node.content)
            case "blockquote":
                return self.quote(node)
            case "bullet_list" | "ordered_list":
                return self.list(node)
            case "hr":
                return self.style.rule()
            case "table":
                return self.style.code_block("", _table_grid(node))
            case "html_block":
                return self.style.text(node.content.rstrip("\n"))
        return self.blocks(node)

    def list(self, node: Node) -> str:
        start = int(str(node.attrs.get("start", 1))) if node.type == "ordered_list" else None
        depth = self._list_depth
        self._list_depth += 1
        try:
            items: list[str] = []
            for i, item in enumerate(node.children):
                number = None if start is None else start + i
                marker = self.style.bullet(depth, number) + " "
                body = self.blocks(item, "\n" if _tight(item) else "\n\n")
                lines = body.split("\n")
                pad = " " * (len(self.style.bullet(depth, number)) + 1) if depth < MAX_NEST else ""
                items.append("\n".join([marker + lines[0], *(pad + line if line else line for line in lines[1:])]))
            return "\n".join(items)
        finally:
            self._list_depth = depth

    def quote(self, node: Node) -> str:
        self._quote_depth += 1
        try:
            inner = self.blocks(node)
            return self.style.quote(inner) if self._quote_depth <= MAX_NEST else inner
        finally:
            self._quote_depth -= 1

    # -- inlines -------------------------------------------------------------------
    def inlines(self, node: Node) -> str:
        return "".join(self.inline(child) for child in node.children)

    def inline(self, node: Node) -> str:
        match node.type:
            case "inline" if node.run is not None:
                key = written_key(type(self.style), tuple(self._open))
                written = node.run.written.get(key)
                if written is None:
                    written = node.run.written[key] = self.inlines(node)
                return written
            case "inline":
                return self.inlines(node)
            case "text" | "html_inline":
                return self.style.text(node.content)
            case "softbreak" | "hardbreak":
                return "\n"
            case "code_inline":
                return self.style.code(node.content)
            case "strong" | "em" | "s":
                return self.wrapped(node)
            case "link" | "image" if "link" in self._open:  # a link cannot hold another one
                return self.style.text(plain_text(node))
            case "link":
                href = str(node.attrs.get("href", ""))  # percent-encoded by markdown-it
                return self.style.link(href, self.within("link", node, self.inlines), plain_text(node))
            case "image":
                src = str(node.attrs.get("src", ""))
                alt = plain_text(node) or src
                return self.style.link(src, self.style.text(alt), alt)
        return self.inlines(node)

    def wrapped(self, node: Node) -> str:
        if node.type in self._open:  # `**a **b** c**`: already bold, the inner one adds nothing
            return self.inlines(node)
        return self.style.wrap(node.type, self.within(node.type, node, self.inlines))

    def within(self, kind: str, node: Node, render: Callable[[Node], str]) -> str:
        self._open.append(kind)
        try:
            return render(node)
        finally:
            self._open.pop()


@lru_cache(maxsize=1024)
def readable_url(href: str) -> str:
    """A link target as a person reads it (and as the model wrote it): percent-escapes and punycode decoded.

    Cached: decoding costs ~50 µs, and a stream's frames write the same links again (the open block's). A
    target markdown-it wrote (every href and src it parses is its `normalizeLink`'s) that is ASCII with no
    percent-escape and no punycode label has nothing to decode: it is its own reading (tests/unit/delivery/
    formatting/test_styles.py checks this on generated targets)."""
    if href.isascii() and "%" not in href and "xn--" not in href.lower():
        return href
    if not reads_back(href):  # decoded as written, its host left as it is
        return mdurl.decode(href, mdurl.DECODE_DEFAULT_CHARS + "%")
    return parser().normalizeLinkText(href)


def reads_back(href: str) -> bool:
    """Whether markdown-it's URL parser (mdurl) writes `href` back as it was: it reorders a target with two
    ports (`https://x:0:1` comes back `https://x:1:0`), and a reading must not change what the model wrote."""
    return mdurl.format(mdurl.parse(href, slashes_denote_host=True)) == href


def plain_text(node: Node) -> str:
    """The text of an inline subtree, without any markup."""
    if node.type in ("text", "code_inline", "html_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return "\n"
    return "".join(plain_text(child) for child in node.children)


def _tight(item: Node) -> bool:
    # markdown-it hides the paragraphs of a tight list's items.
    return all(child.hidden for child in item.children if child.type == "paragraph")


def _language(info: str) -> str:
    word = info.strip().split(maxsplit=1)[0] if info.strip() else ""
    return "".join(ch for ch in word if ch.isalnum() or ch in "+#.-_")


def _table_grid(table: Node) -> str:
    rows: list[list[str]] = []
    for section in table.children:
        for row in section.children:
            rows.append([plain_text(cell).strip() for cell in row.children])
    if not rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(len(r) for r in rows))]
    lines = [" | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)
