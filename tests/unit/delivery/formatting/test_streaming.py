"""A preview shows what is being written formatted already: dangling markup is closed before the cursor."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentstream.config import TextFormat
from agentstream_delivery.formatting import render_frame
from agentstream_delivery.formatting.streaming import FenceMemo, close_dangling
from agentstream_delivery.splitting import open_fence


@pytest.mark.parametrize(
    ("frame", "closed"),
    [
        ("**bold te ▉", "**bold te** ▉"),
        ("a **b ~~c ▉", "a **b ~~c~~** ▉"),  # the one opened last closes first
        ("use `cod ▉", "use `cod` ▉"),
        ("use `a ** b ▉", "use `a ** b` ▉"),  # inside a code span nothing else is open
        ("**done** and ~~st ▉", "**done** and ~~st~~ ▉"),
        ("x ** ▉", "x ** ▉"),  # nothing after the opener yet
        ("ends with ` ▉", "ends with ` ▉"),
        ("```py\nx = 1 ▉", "```py\nx = 1 ▉"),  # the parser runs an open fence to the end itself
        ("Done\n\n```sh ▉", "Done\n\n```sh\n▉"),  # on the fence's line the cursor would be its language
        ("```\n\n ▉", "```\n▉"),
        ("**a**\n\nnew **par ▉", "**a**\n\nnew **par** ▉"),
        ("plain words ▉", "plain words ▉"),
    ],
)
def test_dangling_markup_of_a_preview_is_closed(frame: str, closed: str) -> None:
    assert close_dangling(frame) == closed


def test_only_previews_are_repaired_a_final_shows_what_was_written() -> None:
    assert render_frame("**bold te ▉", TextFormat.TELEGRAM_HTML, final=False) == "<b>bold te</b> ▉"
    assert render_frame("**bold te", TextFormat.TELEGRAM_HTML, final=True) == "**bold te"
    assert render_frame("**bold te ▉", TextFormat.MARKDOWN, final=False) == "**bold te ▉"


@pytest.mark.parametrize("fmt", list(TextFormat))
def test_a_preview_ending_in_an_opening_fence_shows_its_cursor(fmt: TextFormat) -> None:
    # Else it renders like the final text, and the final's edit is refused as "not modified".
    preview = render_frame("Done\n\n```sh ▉", fmt, final=False)
    assert "▉" in preview and preview != render_frame("Done\n\n```sh", fmt, final=True)


# Fence lines and what is almost one: indented four, a second fence on the fence's own line, a lone backtick run.
FENCY = ["```", "```py", "~~~", "~~~~\n", "``` ```", "   ```js x", "    ```", "x```", "`", "``", "```\n"]
WORDS = ["a", " ", "\n", "\n\n", "text "]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(st.sampled_from(FENCY + WORDS), min_size=1, max_size=120).map("".join),
    st.lists(st.integers(0, 2000), min_size=1, max_size=12),
    st.sampled_from([1, 4, 16, 64]),
    st.text(st.sampled_from("`~ \nab"), max_size=40),
)
@example("``` ```\n" + "a\n" * 40 + "``` ```\nb", [200, 300], 1, "")  # the rest of a closing fence's line
def test_the_fence_state_carried_on_from_earlier_frames_is_open_fences_of_the_whole(
    text: str, ends: list[int], head: int, other: str
) -> None:
    # A frame's open fence is carried on from the state after the complete lines an earlier frame had; the
    # texts come growing, shrinking, and rewritten after their first characters.
    memo = FenceMemo(head=head)
    for i, end in enumerate(ends):
        frame = text[: end % (len(text) + 1)]
        if i % 3 == 2:
            frame = frame[: len(frame) // 2] + other
        assert memo.open_fence(frame) == open_fence(frame), frame
