"""`agentstream up` in a terminal: type a message, watch the answer being edited in place."""

from __future__ import annotations

import asyncio
import threading
import uuid

from rich.console import Console

from agentstream.contracts import InboundMessage, RunFinished, User
from agentstream.kafka.topics import INBOUND
from agentstream.service import Service

CONSOLE_CHAT = "local"


def _stdin_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    # A daemon thread: a blocked input() never keeps the process alive at exit.
    while True:
        try:
            line = input()
        except (EOFError, KeyboardInterrupt):
            loop.call_soon_threadsafe(queue.put_nowait, None)
            return
        loop.call_soon_threadsafe(queue.put_nowait, line)


async def chat_loop(ingress: Service, delivery: Service, console: Console, stop: asyncio.Event) -> None:
    """Read lines from stdin and send them as console messages until EOF or `stop`."""
    # Imported here: the CLI imports this module, and most commands need no service.
    from agentstream_delivery import DeliveryService
    from agentstream_ingress.app import IngressService

    assert isinstance(ingress, IngressService) and isinstance(delivery, DeliveryService)
    finished = asyncio.Event()

    def on_finished(event: RunFinished) -> None:
        if event.conversation_key.startswith(f"console:{CONSOLE_CHAT}"):
            finished.set()

    delivery.finished_listeners.append(on_finished)
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    threading.Thread(target=_stdin_lines, args=(asyncio.get_running_loop(), lines), daemon=True).start()
    while not stop.is_set():
        console.print("[bold cyan]you>[/] ", end="")
        getter = asyncio.ensure_future(lines.get())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not getter.done():
            getter.cancel()
            return
        text = getter.result()
        if text is None:
            stop.set()
            return
        if not text.strip():
            continue
        finished.clear()
        msg = InboundMessage(
            id=str(uuid.uuid4()),
            platform="console",
            chat_id=CONSOLE_CHAT,
            user=User(id="local-user", name="you"),
            text=text,
        )
        await ingress.runtime.publish(INBOUND, msg)
        waiter = asyncio.ensure_future(finished.wait())
        stopper = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({waiter, stopper}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
        for task in (waiter, stopper):
            task.cancel()
        if not done:
            console.print("[yellow]no answer within 120 s[/]")
