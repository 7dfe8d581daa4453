"""Golden renderings of answers too long for one message: each part as the platform shows it.

The answer is split the platform's way (`split_text` with its measure, a limit of 600 so
that short texts split), then every part is rendered; each part is checked by the
platform's own rules as well (`platform_rules`).
"""

from __future__ import annotations

import html

import pytest

from agentstream.config import TextFormat
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.adapters.discord import CAPABILITIES as DISCORD
from agentstream_delivery.adapters.signal import CAPABILITIES as SIGNAL
from agentstream_delivery.adapters.slack import CAPABILITIES as SLACK
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.formatting import render
from agentstream_delivery.splitting import split_text, unsplit, utf16_len
from tests.unit.delivery.formatting.platform_rules import accepts

LIMIT = 600
LINES = [f"v{i:02} = '<{i:02}>' & 1" for i in range(40)]
FENCED = "Intro **bold**:\n\n```python\n" + "\n".join(LINES) + "\n```\n\nAfter *it*."


def esc(lines: list[str]) -> str:
    return html.escape("\n".join(lines), quote=False)


def raw(lines: list[str]) -> str:
    return "\n".join(lines)


def parts(text: str, caps: Capabilities) -> list[str]:
    pieces = split_text(text, LIMIT, caps.length())
    assert unsplit(pieces) == text
    rendered = [render(p, caps.formatting) for p in pieces]
    for part in rendered:
        accepts(caps.formatting, part, LIMIT)
    return rendered


TG_PRE = '<pre><code class="language-python">'
FENCE_GOLDEN: list[tuple[Capabilities, list[str]]] = [
    (
        TELEGRAM,  # the block is closed at the cut and reopened, with its language, in the next message
        [
            f"Intro <b>bold</b>:\n\n{TG_PRE}{esc(LINES[:28])}</code></pre>",
            f"{TG_PRE}{esc(LINES[28:])}</code></pre>\n\nAfter <i>it</i>.",
        ],
    ),
    (
        SLACK,  # Slack counts `&lt;` as four characters: more parts; its fences carry no language
        [
            f"Intro *bold*:\n\n```\n{esc(LINES[:17])}\n```",
            f"```\n{esc(LINES[17:35])}\n```",
            f"```\n{esc(LINES[35:])}\n```\n\nAfter _it_.",
        ],
    ),
    (
        DISCORD,
        [
            f"Intro **bold**:\n\n```python\n{raw(LINES[:27])}\n```",
            f"```python\n{raw(LINES[27:])}\n```\n\nAfter *it*.",
        ],
    ),
    (
        SIGNAL,  # plain text: the code's lines, no fences
        [f"Intro bold:\n\n{raw(LINES[:28])}", f"{raw(LINES[28:])}\n\nAfter it."],
    ),
]


@pytest.mark.parametrize(("caps", "expected"), FENCE_GOLDEN, ids=lambda v: getattr(v, "formatting", ""))
def test_a_code_fence_across_a_split_is_closed_and_reopened_in_each_platforms_markup(
    caps: Capabilities, expected: list[str]
) -> None:
    assert parts(FENCED, caps) == expected


@pytest.mark.parametrize("caps", [TELEGRAM, SLACK, DISCORD, SIGNAL], ids=lambda c: c.formatting)
def test_a_code_block_that_fits_the_next_message_moves_there_whole(caps: Capabilities) -> None:
    prose = " ".join(["word"] * 60)
    code = [f"line_{i} = {i}" for i in range(25)]
    text = prose + "\n\n```sh\n" + raw(code) + "\n```\n\nDone."
    first, second = parts(text, caps)
    assert first == prose
    assert (
        second
        == {
            TextFormat.TELEGRAM_HTML: f'<pre><code class="language-sh">{raw(code)}</code></pre>\n\nDone.',
            TextFormat.SLACK_MRKDWN: f"```\n{raw(code)}\n```\n\nDone.",
            TextFormat.DISCORD_MARKDOWN: f"```sh\n{raw(code)}\n```\n\nDone.",
            TextFormat.PLAIN: f"{raw(code)}\n\nDone.",
        }[caps.formatting]
    )


def test_emoji_are_counted_in_utf16_where_the_platform_does_and_never_cut() -> None:
    text = "**Emoji** " + "😀 " * 200 + "_end_ 👍🏽"
    # Telegram and Signal count each 😀 as two UTF-16 units: 163 fit before the limit's margin.
    for caps, bold, it in ((TELEGRAM, "<b>Emoji</b>", "<i>end</i>"), (SIGNAL, "Emoji", "end")):
        first, second = parts(text, caps)
        assert first == bold + " 😀" * 163  # the space the cut kept at the end of the part is not shown
        assert second == "😀 " * 37 + it + " 👍🏽"
        assert utf16_len(first) <= LIMIT
    # Slack and Discord count code points: the whole answer is one message.
    assert parts(text, SLACK) == ["*Emoji* " + "😀 " * 200 + "_end_ 👍🏽"]
    assert parts(text, DISCORD) == ["**Emoji** " + "😀 " * 200 + "*end* 👍🏽"]


@pytest.mark.parametrize("caps", [TELEGRAM, SLACK, DISCORD, SIGNAL], ids=lambda c: c.formatting)
@pytest.mark.parametrize("unit", ["🇩🇪", "👍🏽", "👨\u200d👩\u200d👧"])
def test_a_run_of_emoji_without_spaces_splits_between_them_in_every_markup(caps: Capabilities, unit: str) -> None:
    text = "_x_ " + unit * 400
    rendered = parts(text, caps)
    assert len(rendered) >= 2
    for part in rendered[1:]:
        assert part.replace(unit, "") == "", part[:12]  # whole emoji only, none cut in two
