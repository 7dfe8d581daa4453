"""`agentstream send`: one message produced to `inbound`, its run's events printed as they arrive.

Its own module, importing only what a Kafka client needs: the command a new user runs first
starts in a fraction of the time `up` and `serve` need to import the services.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Annotated

import typer
from rich.markup import escape

from agentstream.config import Settings
from agentstream.contracts import InboundMessage, RunEvent, RunFinished, RunStatus, User
from agentstream.kafka.flavor import resolve_flavor
from agentstream_stack.cli_errors import ExitCode
from agentstream_stack.cli_support import ConfigOpt, client_settings, err, out
from agentstream_stack.run_follower import RunFollower, RunRecorder, StreamPrinter


async def send_and_print(
    settings: Settings, message: InboundMessage, timeout: float, printer: Callable[[RunEvent], None], *, say: bool
) -> RunFinished | None:
    async with RunFollower(await resolve_flavor(settings.kafka)) as follower:
        await follower.send(message)
        if say:  # the first event can take seconds (the runner, the model): say it was sent
            err.print(f"[dim]sent to {escape(message.conversation_key)}, waiting for the answer…[/]", highlight=False)
        async with asyncio.timeout(timeout):
            async for event in follower.follow(message):
                printer(event)
                if isinstance(event, RunFinished):
                    return event
    return None


def send(
    text: Annotated[str, typer.Argument(help="The message text.")],
    chat: Annotated[str, typer.Option(help="Chat id.")] = "cli",
    platform: Annotated[str, typer.Option(help="Platform of the message.")] = "console",
    user: Annotated[str, typer.Option(help="User id.")] = "cli-user",
    assistant: Annotated[str | None, typer.Option(help="Assistant id.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the answer.")] = 120.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document when the run ends instead.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Send one message and print the streamed reply.

    Produces one InboundMessage on `inbound` and prints the run's events as they arrive
    (with --json: the run's outcome, answer, tool results and notices, once it ended).
    """
    settings = client_settings(config)
    msg = InboundMessage(
        id=str(uuid.uuid4()), platform=platform, chat_id=chat, user=User(id=user), text=text, assistant_id=assistant
    )
    recorder = RunRecorder()
    try:
        finished = asyncio.run(
            send_and_print(settings, msg, timeout, recorder if as_json else StreamPrinter(out), say=not as_json)
        )
    except TimeoutError:
        err.print(f"[red]no answer within {timeout:.0f} s[/]")
        raise typer.Exit(ExitCode.FAILED) from None
    if as_json:
        document = recorder.document(message_id=msg.id, conversation_key=msg.conversation_key)
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
    if finished is None or finished.status is not RunStatus.COMPLETED:
        raise typer.Exit(ExitCode.FAILED)
