"""The terminal as a platform: each message is redrawn in place while it streams.

On a terminal a `rich.live.Live` display holds the message being streamed; its
final frame stays on screen. rich shows one live display at a time, so a message
that starts while another one streams is printed once, when final. When the
console is not a terminal (pipes, log files) only final texts are printed.
"""

from __future__ import annotations

import itertools

from rich.console import Console
from rich.live import Live
from rich.text import Text

from agentstream.config import TextFormat, ToolProgress
from agentstream.contracts import KnownPlatform, ReplyTarget
from agentstream_delivery.adapters.base import Capabilities


class ConsoleAdapter:
    platform: str = KnownPlatform.CONSOLE
    bot = ""
    timeout: float | None = None

    def __init__(self, console: Console | None = None, edit_interval: float = 0.1) -> None:
        self.console = console or Console()
        self.capabilities = Capabilities(
            max_length=1_000_000, edit_interval=edit_interval, tool_progress=ToolProgress.OFF
        )
        self._ids = itertools.count(1)
        self._live: tuple[str, Live] | None = None  # (message id, display) of the message on screen

    @property
    def redraws(self) -> bool:
        return self.console.is_terminal and not self.console.is_dumb_terminal

    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str:
        message_id = f"c{next(self._ids)}"
        if final:
            self._print(text)
        elif self.redraws and self._live is None:
            live = Live(Text(text), console=self.console, auto_refresh=False, transient=False)
            live.start(refresh=True)
            self._live = (message_id, live)
        return message_id

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        live = self._live[1] if self._live and self._live[0] == message_id else None
        if live is None:
            if final:
                self._print(text)
            return
        live.update(Text(text), refresh=not final)
        if final:
            live.stop()  # draws the final frame once and leaves it on screen
            self._live = None

    async def close(self) -> None:
        if self._live is not None:
            self._live[1].stop()
            self._live = None

    def _print(self, text: str) -> None:
        self.console.print(Text(text))
