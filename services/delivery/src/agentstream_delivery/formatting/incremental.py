"""A growing text rendered block by block: the blocks a stream has closed are not parsed again.

A stream renders each frame of one growing answer, and parsing the whole text every
time made formatting the most expensive part of delivery (docs/delivery.md, "Formatting
cost"). A rendering is the top-level blocks of one markdown-it parse, each written on its
own and joined; a block is *closed* once the text goes on past it in a way no later text
can undo: either the line before the next block is blank and that next block's first line is
complete, or the block is one a blank line ends for good (a paragraph, a heading, a rule, a
table, a fence with its closing line) and a complete blank line follows it. What comes before
a closed block's end is then parsed the same whatever follows, and the text from a top-level
block's first line (or from a blank line's end) parses on its own as it does in context (the
block parser keeps no state across top-level blocks). So the rendered blocks before the last
closed boundary are kept (a `Chain` of `Mark`s, found again by the text's first characters),
and only the rest is parsed: the output is byte-identical to a whole-text render (a property
test compares both on generated Markdown in generated chunkings). The second rule is what keeps
a stream's open tail to the block being written: the first alone keeps the block before it too,
until the next block's first line ends.

Texts the rule does not cover are rendered whole: one with a link reference definition
(`[x]: url` anywhere changes links anywhere), a carriage return or a NUL (markdown-it
rewrites those before splitting lines), or one shorter than `HEAD`.

Each chain also keeps its closed blocks written as plain text (the fallback every length check
measures too), written once from the parse that closed them (`Companion`): a length check then
knows the exact length of everything but the open tail without rendering (`kept`), and when it
must measure, the markup and its plain fallback come from one parse of the tail (`pair`).

The chains are a bounded memo: which blocks are kept never changes a result, only its cost.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from agentstream.config import TextFormat


class Block(NamedTuple):
    """One top-level block as written, with where it sits in the text parsed (lines, from 0)."""

    first: int | None  # its first line
    end: int | None  # the line after its last
    ended_by_blank: bool  # a blank line after it ends it for good: nothing later joins it
    text: str

    @classmethod
    def at(cls, lines: list[int] | None, kind: str, text: str) -> Block:
        """A block of markdown-it's type `kind` (`_open` dropped) on `lines` (its token's `map`)."""
        first, end = lines if lines else (None, None)
        return cls(first, end, kind in ENDED_BY_BLANK, text)


BlockRenderer = Callable[[str], list[Block]]
# The first `n` of `blocks` (the top-level blocks of `tail` as a markup writes them) written as plain text, from the
# same parse; None when the plain writer does not see the same blocks (then nothing is kept for the fallback).
Companion = Callable[[str, list[Block], int], list[str] | None]
# The blocks a blank line ends for good, by markdown-it's token type (`_open` dropped); a fence only once its
# closing line is in (an open one runs to the text's end: no line follows it). Lists, quotes and indented code
# take more lines after a blank one.
ENDED_BY_BLANK = frozenset({"paragraph", "heading", "hr", "table", "fence"})

HEAD = 64  # characters of a text that find its chain: a stream's text keeps its beginning
MAX_TEXTS = 512  # distinct beginnings remembered (streams open at once, times their markups); ~24 MiB at most for
# texts of a chat message's size (the text, its blocks in the markup and as plain text)
CHAINS_PER_HEAD = 2  # texts that begin alike (the same canned opening) each keep their own chain


class Mark(NamedTuple):
    """A closed boundary: the blocks before `start` never change while the text keeps `source[:witness]`.

    A named tuple: made for every boundary a frame's tail closes, cheaper to make than a frozen dataclass."""

    start: int  # where the next top-level block begins
    witness: int  # the end of that block's first line (its newline included)
    blocks: int  # rendered blocks before `start`


@dataclass(frozen=True)
class Chain:
    source: str  # the text the marks were found in, up to the last witness
    marks: tuple[Mark, ...]  # ascending
    parts: tuple[str, ...]  # the rendered blocks before the last mark
    plain: tuple[str, ...] | None  # the same blocks as plain text (None: not known)

    def best(self, text: str) -> int:
        """The index of the last mark `text` keeps, or -1."""
        if len(text) >= len(self.source) and text.startswith(self.source):
            return len(self.marks) - 1
        for i in range(len(self.marks) - 1, -1, -1):
            witness = self.marks[i].witness
            if witness <= len(text) and text.startswith(self.source[:witness]):
                return i
        return -1


class BlockMemo:
    """Rendered closed blocks per (markup, first `HEAD` characters), least recently used forgotten first."""

    def __init__(self, max_texts: int = MAX_TEXTS, head: int = HEAD) -> None:
        self.max_texts = max_texts
        self.head = head
        self._chains: OrderedDict[tuple[TextFormat, str], tuple[Chain, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._chains)

    def clear(self) -> None:
        self._chains.clear()

    def parts(self, text: str, fmt: TextFormat, blocks: BlockRenderer, companion: Companion | None = None) -> list[str]:
        """Every top-level block of `text` as `blocks` writes it, in order (the same as `blocks(text)`'s).

        With a `companion`, the blocks this text closes are also kept as plain text (for `kept` and `pair`)."""
        located = self._locate(text, fmt)
        if located is None:
            return [block.text for block in blocks(text)]
        rendered, _ = self._render(text, fmt, located, blocks, companion, with_plain=False)
        return rendered

    def pair(self, text: str, fmt: TextFormat, blocks: BlockRenderer, companion: Companion) -> Pair | None:
        """`parts(text, ...)` and the same blocks as plain text, from one parse of what is not kept; None for a
        text rendered whole, or when the plain blocks are not known."""
        located = self._locate(text, fmt)
        if located is None:
            return None
        rendered, plain = self._render(text, fmt, located, blocks, companion, with_plain=True)
        return None if plain is None else Pair(rendered, plain)

    def kept(self, text: str, fmt: TextFormat) -> Kept | None:
        """Where the blocks `text` keeps end, and those blocks in the markup and as plain text (None where the chain
        does not keep them as plain text), without rendering anything (None: nothing kept)."""
        found, at = self._locate(text, fmt) or (None, -1)
        if found is None or at < 0:
            return None
        mark = found.marks[at]
        plain = found.plain if found.plain is not None or fmt is not TextFormat.PLAIN else found.parts
        return Kept(mark.start, found.parts[: mark.blocks], None if plain is None else plain[: mark.blocks])

    def closed_prefixes(self, text: str, fmt: TextFormat) -> Prefixes | None:
        """The prefixes of `text` that end where a blank line closed the blocks before it (`Mark.witness` at its
        `start`), ascending, as (length, blocks before it), with the blocks in the markup and as plain text:
        each such prefix renders to exactly those blocks, so its length needs no rendering."""
        found, at = self._locate(text, fmt) or (None, -1)
        if found is None or at < 0:
            return None
        plain = found.plain if found.plain is not None or fmt is not TextFormat.PLAIN else found.parts
        if plain is None:
            return None
        ends = tuple((m.start, m.blocks) for m in found.marks[: at + 1] if m.start == m.witness)
        count = found.marks[at].blocks
        return Prefixes(ends, found.parts[:count], plain[:count])

    def _locate(self, text: str, fmt: TextFormat) -> tuple[Chain | None, int] | None:
        """The chain `text` keeps most of and the index of its last mark `text` keeps (-1: none), or None when
        `text` is rendered whole: shorter than `HEAD`, or with what the rule does not cover. A chain is only made
        of a text with none of that, so only what follows the blocks it keeps is looked at, in place (every frame
        and length check asks, and a copy or scan of a long text costs as much as the rest of a check)."""
        if len(text) < self.head:
            return None
        found, at = self._find(self._chains.get((fmt, text[: self.head]), ()), text)
        start = max(0, found.marks[at].start - 1) if found is not None and at >= 0 else 0
        if text.find("]:", start) != -1 or text.find("\r", start) != -1 or text.find("\0", start) != -1:
            return None  # a link reference definition, or what markdown-it rewrites before splitting lines
        return found, at

    @staticmethod
    def _find(chains: tuple[Chain, ...], text: str) -> tuple[Chain | None, int]:
        found: Chain | None = None
        at = -1
        for chain in chains:
            i = chain.best(text)
            if i > at or found is None:
                found, at = chain, i
        return found, at

    def _render(
        self,
        text: str,
        fmt: TextFormat,
        located: tuple[Chain | None, int],
        blocks: BlockRenderer,
        companion: Companion | None,
        *,
        with_plain: bool,
    ) -> tuple[list[str], list[str] | None]:
        key = (fmt, text[: self.head])
        chains = self._chains.get(key, ())
        found, at = located
        start, count = (found.marks[at].start, found.marks[at].blocks) if found is not None and at >= 0 else (0, 0)
        kept = found.parts[:count] if found is not None else ()
        kept_plain: tuple[str, ...] | None = ()
        if found is not None and count:
            kept_plain = found.plain[:count] if found.plain is not None else None
        tail = text[start:]
        rendered = blocks(tail)
        tail_plain = companion(tail, rendered, len(rendered)) if with_plain and companion is not None else None
        new_marks = _closed(tail, rendered, start, count)
        if new_marks:
            last = new_marks[-1]
            closing = last.blocks - count
            plain: tuple[str, ...] | None = None
            if kept_plain is not None and companion is not None:
                more = tail_plain[:closing] if tail_plain is not None else companion(tail, rendered, closing)
                plain = None if more is None else (*kept_plain, *more)
            chain = Chain(
                source=text[: last.witness],
                marks=(*(found.marks[: at + 1] if found is not None else ()), *new_marks),
                parts=(*kept, *(block.text for block in rendered[:closing])),
                plain=plain,
            )
            # The text goes on from the chain's last mark: the chain grows. Else it parted from every
            # chain after some mark (a rewritten text, or another one that begins alike): a chain of its own.
            grows = found is not None and at == len(found.marks) - 1
            others = tuple(c for c in chains if c is not found) if grows else chains
            self._chains[key] = (chain, *others)[:CHAINS_PER_HEAD]
            while len(self._chains) > self.max_texts:
                self._chains.popitem(last=False)
        if key in self._chains:
            self._chains.move_to_end(key)
        out = [*kept, *(block.text for block in rendered)]
        if kept_plain is None or tail_plain is None:
            return out, None
        return out, [*kept_plain, *tail_plain]


class Pair(NamedTuple):
    """A text's top-level blocks in a markup and as plain text, in order."""

    markup: list[str]
    plain: list[str]


class Prefixes(NamedTuple):
    ends: tuple[tuple[int, int], ...]  # (a prefix's length, the blocks it renders to), ascending
    markup: tuple[str, ...]
    plain: tuple[str, ...]


class Kept(NamedTuple):
    """What a text keeps from its chain: the blocks before `start`, in the markup and as plain text (if known)."""

    start: int
    markup: tuple[str, ...]
    plain: tuple[str, ...] | None


def _closed(tail: str, rendered: list[Block], offset: int, count: int) -> list[Mark]:
    """The closed boundaries in `tail` (which starts at `offset` of the text, after `count` blocks), ascending."""
    starts = [0]  # where each line of `tail` starts; the last one has no newline yet
    nl = tail.find("\n")
    while nl != -1:
        starts.append(nl + 1)
        nl = tail.find("\n", nl + 1)

    def blank(line: int) -> bool:  # complete (its newline in) and only spaces or tabs, as markdown-it sees it
        return line + 1 < len(starts) and not tail[starts[line] : starts[line + 1] - 1].strip(" \t")

    marks: dict[int, Mark] = {}  # by blocks before it: the one found first has the earlier witness
    for j, block in enumerate(rendered):
        end = block.end
        if block.ended_by_blank and end is not None and blank(end):
            at = offset + starts[end + 1]  # the blank line's end: what follows parses on its own
            if count + j + 1 not in marks:
                marks[count + j + 1] = Mark(start=at, witness=at, blocks=count + j + 1)
        first = block.first
        if j == 0:
            continue
        if first is None or first < 1 or first + 1 >= len(starts):
            break  # where it begins is not known, or its first line is still being written
        if blank(first - 1):  # else no blank line before it: the previous block could still take this line
            start = offset + starts[first]
            if count + j not in marks:
                marks[count + j] = Mark(start=start, witness=offset + starts[first + 1], blocks=count + j)
    return sorted(marks.values(), key=lambda m: m.blocks)


MEMO = BlockMemo()
