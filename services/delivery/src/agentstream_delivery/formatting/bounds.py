"""How long a rendering can be, from its Markdown alone: what lets a length check skip rendering.

`RenderedMeasure` (formatting/__init__.py) tries these bounds before it renders: each must never be below
what any rendering of the text measures (tests/unit/delivery/formatting/test_frames.py checks them on
generated Markdown), so which one settles a check never changes its answer, only its cost.
"""

from __future__ import annotations

import re

from agentstream.config import TextFormat

# (times the Markdown's length, plus per line): Slack escapes `&` as five characters, the web's HTML has tags.
GROWTH: dict[TextFormat, tuple[int, int]] = {
    TextFormat.PLAIN: (3, 32),
    TextFormat.TELEGRAM_HTML: (3, 32),
    TextFormat.DISCORD_MARKDOWN: (3, 32),
    TextFormat.SLACK_MRKDWN: (5, 32),
    TextFormat.HTML: (12, 160),
}


def proportional(text: str) -> bool:
    """Whether `text`'s rendering grows in proportion to it (`GROWTH`): not a table's (its cells are padded to
    the widest in their column) nor a link reference's (its target is written out wherever the label is used)."""
    return "|" not in text and "]:" not in text


def may_autolink(text: str) -> bool:
    """Whether `text` could hold an autolink (CommonMark: `<`, then a scheme and `:`, or an address and `@`)."""
    return _AUTOLINK.search(text) is not None


_AUTOLINK = re.compile(r"<(?:[A-Za-z][A-Za-z0-9+.\-]{1,31}:|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]+@)")
# A line's first characters (searched in "\n" + text: a literal first is found faster than `^` in MULTILINE).
_QUOTED = re.compile(r"\n[ \t]*>")
_BULLETED = re.compile(r"\n[ \t>]*[-+*]")
_NUMBERED = re.compile(r"\n[ \t>]*[0-9]")


def plain_growth(text: str) -> int:
    """How much longer than `text` (a proportional one with no autolink) its plain rendering can be, in either unit.

    Without an autolink nothing writes its target twice (`a@b.c (mailto:a@b.c)`, what `GROWTH`'s 3x is for), and
    everything else the plain writer shows is at most as long as its Markdown, but for: a `%` that is no valid
    escape in a link target (written `%25`), a tab a list or code block widens to spaces, and per line a
    separator (`\n\n` between blocks the Markdown put on consecutive lines) plus, where the text has them,
    the quote marks (`> `, three levels deep, on lazy lines and the lines between a quote's blocks) and the
    list indents (two per level, three levels; a number's digits, up to nine more per level, where items
    are numbered). `tests/unit/delivery/formatting/test_frames.py` checks it on generated Markdown."""
    per_line = 2
    lines = "\n" + text
    if _QUOTED.search(lines):
        per_line += 12
    if _BULLETED.search(lines):
        per_line += 6
    if _NUMBERED.search(lines):
        per_line += 33
    return 2 * text.count("%") + 3 * text.count("\t") + per_line * (text.count("\n") + 1)
