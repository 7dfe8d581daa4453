"""The console platform: redraws in place on a terminal, prints final texts once otherwise."""

from __future__ import annotations

import io

from rich.console import Console

from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters import ConsoleAdapter

TARGET = ReplyTarget(platform="console", chat_id="local")


async def stream(adapter: ConsoleAdapter) -> None:
    mid = await adapter.send(TARGET, "Hello ▉")
    await adapter.edit(TARGET, mid, "Hello wor ▉")
    await adapter.edit(TARGET, mid, "Hello world", final=True)
    await adapter.send(TARGET, "Second [bold]message[/]", final=True)


async def test_not_a_terminal_prints_each_final_text_once():
    out = io.StringIO()
    adapter = ConsoleAdapter(Console(file=out, force_terminal=False, width=80))
    assert not adapter.redraws
    await stream(adapter)
    await adapter.close()
    assert out.getvalue() == "Hello world\nSecond [bold]message[/]\n"  # no cursor frames, no markup parsing


async def test_terminal_redraws_in_place_and_keeps_the_final_frame():
    out = io.StringIO()
    adapter = ConsoleAdapter(Console(file=out, force_terminal=True, width=80, color_system=None))
    assert adapter.redraws
    await stream(adapter)
    await adapter.close()
    screen = out.getvalue()
    assert "Hello ▉" in screen  # the intermediate frame was drawn…
    assert "\x1b[" in screen  # …and overwritten with cursor movements
    assert screen.count("Hello world") == 1 and screen.count("Second [bold]message[/]") == 1
