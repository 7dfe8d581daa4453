"""`agentstream top`: the stack's figures, live in the terminal (rich Live), once, or as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from agentstream_stack.top_metrics import Figure, Scrape, figures, lag_by_group, scrape_all

ABSENT = "–"
LABELS = {
    Figure.RUNS_STARTED_PER_S: "runs started /s",
    Figure.RUNS_FINISHED_PER_S: "runs finished /s",
    Figure.RUNS_FAILED_PER_S: "runs failed /s",
    Figure.ACTIVE_RUNS: "active runs",
    Figure.CONSUMER_LAG: "consumer lag (records)",
    Figure.RATE_LIMITED_PER_S: "429s /s",
    Figure.RATE_LIMITED: "429s (total)",
    Figure.DEAD_LETTERS_PER_S: "dead letters /s",
    Figure.DEAD_LETTERS: "dead letters (total)",
}


def shown(value: float | None) -> str:
    if value is None:
        return ABSENT
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


def frame_json(before: Sequence[Scrape], now: Sequence[Scrape]) -> dict[str, Any]:
    return {
        "figures": {figure.value: value for figure, value in figures(before, now).items()},
        "lag": lag_by_group(now),
        "services": {s.service: {"url": s.url, "up": s.error is None, "error": s.error} for s in now},
    }


def frame_view(before: Sequence[Scrape], now: Sequence[Scrape]) -> Group:
    stack = Table(title="agentstream", show_header=False, expand=False)
    stack.add_column(style="bold")
    stack.add_column(justify="right")
    for figure, value in figures(before, now).items():
        stack.add_row(LABELS[figure], shown(value))
    services = Table(title="services")  # 80 columns: the url and the error fold, never cut
    services.add_column("service", no_wrap=True)
    services.add_column("url", overflow="fold")
    services.add_column("metrics", overflow="fold")
    for s in now:
        services.add_row(s.service, s.url, "[green]ok[/]" if s.error is None else f"[red]{s.error}[/]")
    parts: list[Table] = [stack, services]
    lag = lag_by_group(now)
    if lag:
        groups = Table(title="lag by consumer group")
        groups.add_column("group", overflow="fold")
        groups.add_column("records", justify="right")
        for group, value in lag.items():
            groups.add_row(group, shown(value))
        parts.append(groups)
    return Group(*parts)


async def run_top(
    urls: Mapping[str, str], token: str | None, interval: float, once: bool, as_json: bool, console: Console
) -> None:
    """Scrape every `interval` seconds; rates are between two scrapes, so one frame takes two."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=max(interval, 1.0)) as client:
        before = await scrape_all(client, urls)
        await asyncio.sleep(interval)
        now = await scrape_all(client, urls)
        if once or as_json:
            if as_json:
                console.print(json.dumps(frame_json(before, now)), markup=False, highlight=False, soft_wrap=True)
            else:
                console.print(frame_view(before, now))
            return
        quit_pressed = asyncio.Event()

        def on_key(key: str) -> None:
            if key in QUIT_KEYS:
                quit_pressed.set()

        with keys_pressed(on_key), Live(frame_view(before, now), console=console, auto_refresh=False) as live:
            while not quit_pressed.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(quit_pressed.wait(), interval)
                if quit_pressed.is_set():
                    break
                before, now = now, await scrape_all(client, urls)
                live.update(frame_view(before, now), refresh=True)


QUIT_KEYS = ("q", "Q")


@contextlib.contextmanager
def keys_pressed(on_key: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, `on_key(character)` for each key typed on a terminal's stdin (read
    unbuffered, not echoed); nothing where stdin is not a terminal (a pipe, CI)."""
    if not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    loop = asyncio.get_running_loop()

    def read() -> None:
        for key in os.read(fd, 64).decode(errors="replace"):
            on_key(key)

    tty.setcbreak(fd)
    loop.add_reader(fd, read)
    try:
        yield
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
