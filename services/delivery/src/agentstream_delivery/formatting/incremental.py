"""A growing text rendered block by block: the blocks a stream has closed are not parsed again.

A stream renders each frame of one growing answer, and parsing the whole text every
time made formatting the most expensive part of delivery (docs/delivery.md, "Formatting
cost"). A rendering is the top-level blocks of one markdown-it parse, each written on its
own and joined; a block is *closed* once the text goes on past it in a way no later text
can undo: the line before the next block is blank and that next block's first line is
complete. What comes before a closed block's end is then parsed the same whatever
follows, and the text from a top-level block's first line parses on its own as it does in
context (the block parser keeps no state across top-level blocks). So the rendered
blocks before the last closed boundary are kept (a `Chain` of `Mark`s, found again by
the text's first characters), and only the rest is parsed: the output is byte-identical
to a whole-text render (a property test compares both on generated Markdown in
generated chunkings).

Texts the rule does not cover are rendered whole: one with a link reference definition
(`[x]: url` anywhere changes links anywhere), a carriage return or a NUL (markdown-it
rewrites those before splitting lines), or one shorter than `HEAD`.

The chains are a bounded memo: which blocks are kept never changes a result, only its cost.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from agentstream.config import TextFormat

# (first line of the block, relative to the text parsed; the block as written), per top-level block.
BlockRenderer = Callable[[str], list[tuple[int | None, str]]]

HEAD = 64  # characters of a text that find its chain: a stream's text keeps its beginning
MAX_TEXTS = 512  # distinct beginnings remembered (streams open at once, times their markups); ~16 MiB at most
CHAINS_PER_HEAD = 2  # texts that begin alike (the same canned opening) each keep their own chain
_WHOLE_ONLY = ("]:", "\r", "\0")


@dataclass(frozen=True)
class Mark:
    """A closed boundary: the blocks before `start` never change while the text keeps `source[:witness]`."""

    start: int  # where the next top-level block begins
    witness: int  # the end of that block's first line (its newline included)
    count: int  # rendered blocks before `start`


@dataclass(frozen=True)
class Chain:
    source: str  # the text the marks were found in, up to the last witness
    marks: tuple[Mark, ...]  # ascending
    parts: tuple[str, ...]  # the rendered blocks before the last mark

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

    def parts(self, text: str, fmt: TextFormat, blocks: BlockRenderer) -> list[str]:
        """Every top-level block of `text` as `blocks` writes it, in order (the same as `blocks(text)`'s)."""
        if len(text) < self.head or any(s in text for s in _WHOLE_ONLY):
            return [part for _, part in blocks(text)]
        key = (fmt, text[: self.head])
        chains = self._chains.get(key, ())
        found: Chain | None = None
        at = -1
        for chain in chains:
            i = chain.best(text)
            if i > at or found is None:
                found, at = chain, i
        start, count = (found.marks[at].start, found.marks[at].count) if found is not None and at >= 0 else (0, 0)
        kept = found.parts[:count] if found is not None else ()
        tail = text[start:]
        rendered = blocks(tail)
        new_marks = _closed(tail, rendered, start, count)
        if new_marks:
            last = new_marks[-1]
            chain = Chain(
                source=text[: last.witness],
                marks=(*(found.marks[: at + 1] if found is not None else ()), *new_marks),
                parts=(*kept, *(part for _, part in rendered[: last.count - count])),
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
        return [*kept, *(part for _, part in rendered)]


def _closed(tail: str, rendered: list[tuple[int | None, str]], offset: int, count: int) -> list[Mark]:
    """The closed boundaries in `tail` (which starts at `offset` of the text, after `count` blocks)."""
    marks: list[Mark] = []
    line, pos = 0, 0  # the line `pos` starts
    prev_start = 0  # where the line before `pos` starts
    for j in range(1, len(rendered)):
        first = rendered[j][0]
        if first is None or first < 1:
            return marks
        while line < first:
            nl = tail.find("\n", pos)
            if nl == -1:
                return marks
            prev_start, pos, line = pos, nl + 1, line + 1
        end = tail.find("\n", pos)
        if end == -1:
            return marks  # the block's first line is still being written
        if tail[prev_start:pos].strip():
            continue  # no blank line before it: the previous block could still take this line
        marks.append(Mark(start=offset + pos, witness=offset + end + 1, count=count + j))
    return marks


MEMO = BlockMemo()
