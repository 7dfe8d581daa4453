"""What a stream sends never depends on what formatting kept from earlier frames.

The state machine renders a due frame before its length check (the check then counts the frame's kept
blocks instead of parsing the open tail again), and the memo and caches only ever save work. So every
platform operation (its bytes, where a message is cut) must be the same when everything kept is forgotten
before each input: generated answers are streamed through the state machine both ways, with limits small
enough that they split, and with deltas fast enough that most frames are held back.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentstream_delivery.formatting as formatting
from agentstream.contracts import RunStatus
from agentstream_delivery.formatting import tree
from agentstream_delivery.formatting.incremental import MEMO
from agentstream_delivery.formatting.streaming import FENCES
from agentstream_delivery.platform_ops import Op
from agentstream_delivery.stream_inputs import Finish, StreamInput, TextDelta
from agentstream_delivery.stream_machine import transition
from agentstream_delivery.stream_model import StreamModel
from tests.unit.delivery.formatting.test_frames import PLATFORMS, markdown

# Blocks of an answer long enough that a few of them fill a message, between the generated pieces.
LONG = [
    "The **fastest** way is _usually_ `sort -u` (see [the manual](https://man7.org/sort)). " * 3,
    "- keeps ~~duplicates~~ *once*\n- handles 👍🏽 and 🇩🇪\n" * 4,
    "```sh\nsort -u < in.txt > out.txt\n" * 6 + "```",
    "word " * 90,
    "> a quoted line that goes on\n" * 5,
    "1. one\n2. two **bold\n3. three\n" * 3,
]
answers = st.lists(st.one_of(markdown, st.sampled_from(LONG)), min_size=4, max_size=30).map("\n\n".join)
CACHES = (
    formatting.render,
    formatting.render_frame,
    formatting.render_pair,
    formatting._pair_parts,
    formatting._part_facts,
    formatting._kept_sizes,
    formatting._kept_size,
    tree.parse,
    tree.tokens,
    tree.inline_tokens,
)


def forget_everything() -> None:
    MEMO.clear()
    FENCES.clear()
    for cache in CACHES:
        cache.cache_clear()


def ops_of(name: str, text: str, chunk: int, gap: float, *, forgetful: bool) -> list[Op]:
    caps = replace(PLATFORMS[name], max_length=600)  # a few hundred characters a message: answers split
    model = StreamModel(caps)
    inputs: list[StreamInput] = [TextDelta("m1", text[i : i + chunk]) for i in range(0, len(text), chunk)]
    inputs.append(Finish(RunStatus.COMPLETED, text=text))
    ops: list[Op] = []
    now = 0.0
    for inp in inputs:
        if forgetful:
            forget_everything()
        now += gap
        model, out = transition(model, inp, now)
        ops += out
    return ops


@pytest.mark.timeout(180)  # each answer streamed twice per platform
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    answers,
    st.integers(1, 60),
    st.sampled_from([0.05, 0.3, 2.0]),
    st.sampled_from(sorted(PLATFORMS)),
)
@example("**bold** " * 120 + "\n\n- a\n- b\n\n" + "```py\nx = 1\n" * 40 + "```\n\nend", 17, 0.05, "discord")
def test_a_stream_sends_the_same_whatever_was_kept_from_earlier_frames(
    text: str, chunk: int, gap: float, name: str
) -> None:
    forget_everything()
    kept = ops_of(name, text, chunk, gap, forgetful=False)
    assert ops_of(name, text, chunk, gap, forgetful=True) == kept, name
