"""Think blocks are hidden at block boundaries, held back while partial, shown as prose mid-sentence."""

from __future__ import annotations

import pytest

from agentstream_delivery.think import visible_text


def stream(deltas: list[str]) -> list[str]:
    raw, frames = "", []
    for d in deltas:
        raw += d
        frames.append(visible_text(raw, final=False))
    return frames


@pytest.mark.parametrize("tag", ["think", "thinking", "reasoning", "thought", "REASONING_SCRATCHPAD"])
def test_block_at_start_is_hidden(tag: str):
    assert visible_text(f"<{tag}>plan it</{tag}>\n\nThe answer.", final=True) == "The answer."


def test_tags_split_across_deltas_never_leak():
    frames = stream(["<th", "ink>secret pl", "an</thi", "nk>\nHello", " world"])
    assert all("secret" not in f and "<" not in f for f in frames)
    assert frames[-1] == "Hello world"


def test_partial_tag_at_line_start_is_held_then_released_when_not_a_tag():
    frames = stream(["Intro\n<th", "e cat> sat"])
    assert frames[0] == "Intro\n"
    assert frames[1] == "Intro\n<the cat> sat"


def test_mention_mid_sentence_is_prose():
    text = "You can wrap it in a <think> tag, as I said."
    assert visible_text(text, final=True) == text
    assert stream(["You can use <thi", "nk> tags"])[0] == "You can use <thi"


def test_unclosed_block_is_suppressed():
    assert visible_text("Sure.\n<think>I should not say this", final=True) == "Sure.\n"
    assert visible_text("<thinking>never closed", final=True) == ""


def test_visible_text_only_grows_while_streaming():
    frames = stream(list("Answer:\n<think>x</think>\nmore text here"))
    assert all(b.startswith(a) for a, b in zip(frames, frames[1:], strict=False))
