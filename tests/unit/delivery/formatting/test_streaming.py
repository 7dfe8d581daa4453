"""A preview shows what is being written formatted already: dangling markup is closed before the cursor."""

from __future__ import annotations

import pytest

from agentstream.config import TextFormat
from agentstream_delivery.formatting import render_frame
from agentstream_delivery.formatting.streaming import close_dangling


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
