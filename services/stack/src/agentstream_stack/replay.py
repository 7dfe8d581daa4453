"""`agentstream replay`: a stored run's visible stream re-published for a new target.

Reads the run's archived events (`run_events`, written by persistence when the run was
flushed), gives them the replay's identity (`agentstream.contracts.replayed`) and produces
them on `events` in their order, keyed by the target's conversation; delivery renders them for
that platform like any run, under the replay id's own ledger scope.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaProducer
from pydantic import TypeAdapter
from sqlalchemy import select

from agentstream.config import KafkaSettings
from agentstream.contracts import ArchivedEvent, KnownPlatform, ReplyTarget, RunFinished, new_id, replayed
from agentstream.db import Run
from agentstream.db.models_persistence import RunEventRow
from agentstream.kafka import Topics
from agentstream.kafka.flavor import resolve_flavor, tuning
from agentstream.kafka.producer import encode_record
from agentstream.kafka.security import client_security
from agentstream_stack.runs_store import open_runs_db

CONSOLE_CHAT = "local"  # the chat of `agentstream up`'s terminal
ARCHIVED: TypeAdapter[ArchivedEvent] = TypeAdapter(ArchivedEvent)


class ReplayError(Exception):
    """The run cannot be replayed: unknown, not finished, or stored without its stream."""


class BadTarget(ValueError):
    """`--to` names no target."""


def parse_target(text: str, replay_id: str) -> ReplyTarget:
    """`console`, `web` (a new chat of its own), or `PLATFORM:CHAT[:THREAD]`."""
    platform, _, rest = text.partition(":")
    chat, _, thread = rest.partition(":")
    if not platform:
        raise BadTarget(f"--to {text!r}: expected console, web or PLATFORM:CHAT (e.g. telegram:12345)")
    if not chat:
        if platform == KnownPlatform.CONSOLE:
            chat = CONSOLE_CHAT
        elif platform == KnownPlatform.WEB:
            chat = f"replay-{replay_id[:8]}"
        else:
            raise BadTarget(f"--to {text!r}: {platform} needs a chat: {platform}:CHAT_ID")
    return ReplyTarget(platform=platform, chat_id=chat, thread_id=thread or None)


@dataclass(frozen=True)
class Replay:
    replay_id: str
    replay_of: str
    target: ReplyTarget
    events: list[ArchivedEvent]


async def load_replay(database_url: str, run_id: str, target: ReplyTarget, replay_id: str | None = None) -> Replay:
    """The replay of `run_id` (or the one run id it starts) onto `target`, ready to publish."""
    async with open_runs_db(database_url) as sessions, sessions() as session:
        resolved = run_id
        if await session.get(Run, run_id) is None:
            matches = list(
                await session.scalars(select(Run.run_id).where(Run.run_id.startswith(run_id, autoescape=True)).limit(2))
            )
            if len(matches) != 1:
                raise ReplayError(
                    f"unknown run {run_id}: no stored run has this id"
                    if not matches
                    else f"{run_id!r} matches several runs: {', '.join(matches)}"
                )
            resolved = matches[0]
        rows = await session.scalars(
            select(RunEventRow.event).where(RunEventRow.root_run_id == resolved).order_by(RunEventRow.seq)
        )
        archived = [ARCHIVED.validate_python(row) for row in rows]
    if not archived:
        raise ReplayError(f"run {resolved} has no archived stream (stored before runs kept one, or it never started)")
    if not isinstance(archived[-1], RunFinished):
        raise ReplayError(f"run {resolved}'s archived stream does not end with run.finished")
    replay_id = replay_id or new_id()
    return Replay(replay_id, resolved, target, [replayed(e, replay_id, target) for e in archived])


async def publish_replay(kafka: KafkaSettings, replay: Replay) -> None:
    """Every event on `events`, one after the other (their order is the stream's)."""
    kafka = await resolve_flavor(kafka)
    broker = tuning(kafka)
    producer = AIOKafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers,
        enable_idempotence=broker.idempotent,
        acks=broker.acks,
        **client_security(kafka),
    )
    await producer.start()
    try:
        topic = Topics(kafka.topic_prefix).events
        for event in replay.events:
            key, value, headers = encode_record(event, event.conversation_key)
            await producer.send_and_wait(topic, value, key=key, headers=headers)
    finally:
        await producer.stop()
