"""Generated Markdown: every frame a stream shows, and every part of a split, is one the platform accepts.

A frame is any prefix of the answer with the cursor (what an intermediate edit shows);
a part is what the stream state machine finalizes when the answer outgrows a message.
Each is rendered for the platform and checked by its own rules (`platform_rules`:
Telegram's are those of the fake Bot API), its length as the platform counts it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentstream.config import TextFormat, ToolProgress
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.adapters.discord import CAPABILITIES as DISCORD
from agentstream_delivery.adapters.signal import CAPABILITIES as SIGNAL
from agentstream_delivery.adapters.slack import CAPABILITIES as SLACK
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.formatting import (
    RenderedMeasure,
    plain,
    render,
    render_frame,
    render_whole,
)
from agentstream_delivery.formatting.bounds import may_autolink, plain_growth, proportional
from agentstream_delivery.formatting.incremental import MEMO
from agentstream_delivery.platform_ops import Op
from agentstream_delivery.render import CURSOR, visible_chars
from agentstream_delivery.splitting import MEASURES, split_text, unsplit
from agentstream_delivery.stream_inputs import Finish, TextDelta
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel
from tests.unit.delivery.formatting.platform_rules import accepts

WEB = Capabilities(max_length=100_000, tool_progress=ToolProgress.OFF, formatting=TextFormat.HTML)
PLATFORMS = {"telegram": TELEGRAM, "slack": SLACK, "discord": DISCORD, "signal": SIGNAL, "web": WEB}

# Pieces of Markdown a model writes, and the characters that are markup somewhere.
PIECES = [
    "# ", "## ", "#### ", "- ", "* ", "1. ", "  - ", "> ", "> > ", "\n", "\n\n", "**", "*", "_", "__", "~~", "`",
    "```", "```python\n", "\n```\n", "[", "](", "https://example.com/a?b=1&c=2", ")", "![", "<", ">", "&", "&amp;",
    "&nbsp;", "<b>", "</i>", "|", "| a | b |\n|---|---|\n| 1 | 2 |\n", "\\", "😀", "👍🏽", "🇩🇪", "é", "\u200d",
    "word", " ", "tab\t", "---\n", "<https://x.io>", "javascript:alert(1)", '"', "'",
    "[ü](https://ü.de/é%20(x))", "    - ", "      1. ", "> > > > ", "\nlazy", "999999999. ", "=====\n",
]  # fmt: skip
markdown = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(alphabet="ab <>&*_`#-\n😀", max_size=6)), max_size=40
).map("".join)


@pytest.mark.timeout(120)  # every prefix of each example, rendered for five platforms
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(markdown)
def test_every_intermediate_frame_is_accepted(text: str) -> None:
    for caps in PLATFORMS.values():
        for end in range(1, len(text) + 1):
            frame = text[:end] + CURSOR
            accepts(caps.formatting, render_frame(frame, caps.formatting, final=False), caps.max_length)


@pytest.mark.timeout(120)  # long generated answers streamed through the state machine, per platform
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(markdown, min_size=1, max_size=30).map("\n\n".join), st.integers(7, 60), st.sampled_from(sorted(PLATFORMS))
)
def test_every_streamed_frame_and_split_part_is_accepted(text: str, chunk: int, name: str) -> None:
    # A small limit, so that generated answers split into several messages.
    caps = replace(PLATFORMS[name], max_length=620, edit_interval=1.0, tool_progress=ToolProgress.OFF)
    ops = stream(caps, text, chunk)
    unit = MEASURES[caps.measure]
    for op in ops:
        accepts(caps.formatting, render_frame(op.text, caps.formatting, final=op.final), caps.max_length)
        assert unit(plain(op.text)) <= caps.max_length  # the fallback of a refused frame fits too
    finals = [op.text for op in ops if op.final]
    if caps.can_edit:
        assert unsplit(finals) == text.strip() or unsplit(finals) == text


@pytest.mark.timeout(60)  # splits of generated answers, every part rendered
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(markdown, min_size=1, max_size=30).map("\n\n".join), st.sampled_from(sorted(PLATFORMS)))
def test_every_part_of_a_split_fits_and_is_accepted(text: str, name: str) -> None:
    caps = replace(PLATFORMS[name], max_length=620)
    parts = split_text(text, caps.max_length, caps.length())
    for part in parts:
        if visible_chars(part):  # a stream never sends a message of whitespace alone
            accepts(caps.formatting, render(part, caps.formatting), caps.max_length)
    assert unsplit(parts) == text


@pytest.mark.timeout(60)  # every generated answer rendered for five platforms
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(markdown, min_size=1, max_size=8).map("\n".join))
def test_the_cheap_length_bound_is_never_below_the_rendered_length(text: str) -> None:
    # Splitting trusts the bound to skip rendering: it must never say a text fits that does not.
    for caps in PLATFORMS.values():
        measure = caps.length()
        assert isinstance(measure, RenderedMeasure)
        assert measure.bound(text) >= measure(text)
        assert measure._growth(text) >= measure(text) or not proportional(text)  # what `fits` tries first
        for room in (measure(text) - 1, measure(text)):
            assert measure.fits(text, room) is (measure(text) <= room), (caps.formatting, room)


# What the plain writer widens: quotes, lists (numbered far past their Markdown's digits), lazy lines, tabs, a `%`
# that is no escape in a link target, entities, autolinks (which `plain_growth` leaves to `GROWTH`).
WIDENING = [
    "> ", ">", "> > > ", "- ", "1. ", "1) ", "999999999. ", "0. ", "  ", "    ", "\t", "-\t", "1.\t", "\nlazy", "\n  cont",
    "[a](%)", "[a](x%)", "[b](%%%)", "![i](%zz)", "&#128512;", "\\*", "  \n", "***", "---", "===", "```\n", "~~~\n",
    "    code\n", "\t\tcode\n", "<a@b.c>", "<https://x.y>", "< x", "a<b", "\\<a@b>", "x", "😀", " ", "\n", "\n\n",
]  # fmt: skip


@pytest.mark.timeout(60)
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(PIECES + WIDENING), max_size=60).map("".join))
@example("> > > 999999999. 999999999. 999999999. a" + "\nb" * 50)  # lazy lines under every quote and list level
@example("999999999. a\n" + "1. b\n" * 40)  # items numbered past their Markdown's digits
@example("> > > # a\n> > > # b\n> > > # c\n" * 20)  # the lines between a quote's blocks
@example("- \t\tcode\n" * 10)
def test_the_plain_growth_bound_is_never_below_the_plain_rendering(text: str) -> None:
    # Signal's length check trusts it for texts with no autolink (what would write a target twice).
    if may_autolink(text) or not proportional(text):
        return
    shown = render_whole(text, TextFormat.PLAIN)
    for unit in MEASURES.values():
        assert unit(shown) <= unit(text) + plain_growth(text), (text, shown)


def test_a_text_with_link_references_is_measured_for_where_each_label_writes_the_target() -> None:
    # `[x][r]` is seven characters and shows `x (target)`: no growth factor bounds that, so it is rendered.
    text = "[r]: https://example.com/" + "a" * 50 + "\n\n" + "[x][r] " * 60
    measure = SIGNAL.length()
    assert isinstance(measure, RenderedMeasure)
    assert measure(text) > 4000 > 1898 > len(text)
    assert not measure.fits(text, 1898)
    assert all(measure(part) <= 1898 for part in split_text(text, SIGNAL.max_length, measure))


@pytest.mark.timeout(120)  # every prefix of each generated answer, five platforms
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(markdown, min_size=1, max_size=12).map("\n\n".join), st.integers(1, 40))
def test_the_bound_from_the_kept_blocks_of_a_growing_answer_is_never_below_its_rendered_length(
    text: str, chunk: int
) -> None:
    # A growing answer's frames keep its closed blocks (`MEMO`); the bound then counts them exactly and bounds
    # only the rest. Splitting trusts it as it trusts the cheap bound.
    MEMO.clear()
    for caps in PLATFORMS.values():
        measure = caps.length()
        assert isinstance(measure, RenderedMeasure)
        for end in [*range(chunk, len(text), chunk), len(text)]:
            render_frame(text[:end] + CURSOR, caps.formatting, final=False)  # what a preview renders
            rendered = measure(text[:end])
            assert measure.bound(text[:end]) >= rendered, (caps.formatting, text[:end])
            for room in (rendered - 1, rendered, 100_000):  # a room settles a check by the first bound under it
                assert measure.bound(text[:end], room) >= rendered, (caps.formatting, room, text[:end])
                assert measure.fits(text[:end], room) is (rendered <= room), (caps.formatting, room, text[:end])


@pytest.mark.timeout(120)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(markdown, min_size=2, max_size=12).map("\n\n".join), st.integers(1, 40), st.integers(0, 400))
def test_where_a_growing_answer_is_cut_is_looked_for_between_its_kept_blocks(text: str, chunk: int, room: int) -> None:
    # A split bisects only between the closed prefixes around the answer: each end of the range is measured
    # from kept blocks, and it must be what rendering the prefix measures.
    MEMO.clear()
    for caps in PLATFORMS.values():
        measure = caps.length()
        assert isinstance(measure, RenderedMeasure)
        for end in range(chunk, len(text), chunk):
            render_frame(text[:end] + CURSOR, caps.formatting, final=False)
        lo, hi = measure.span(text, room)
        assert 0 <= lo <= hi <= len(text)
        assert lo == 0 or measure(text[:lo]) <= room, (caps.formatting, text[:lo])
        assert hi == len(text) or measure(text[: hi + 1]) > room, (caps.formatting, text[: hi + 1])


def stream(caps: Capabilities, text: str, chunk: int) -> list[Op]:
    """The answer in deltas of `chunk` characters, 2 s apart (every frame is due), then completed."""
    model = StreamModel(caps)
    ops: list[Op] = []
    now = 0.0
    for i in range(0, len(text), chunk):
        now += 2.0
        model, out = transition(model, TextDelta("m1", text[i : i + chunk]), now)
        ops += out
    model, out = transition(model, Finish("completed", text=text), now + 2.0)
    return ops + out
