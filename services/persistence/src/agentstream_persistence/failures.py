"""Why a flush failed, and what a run that can never be stored leaves on `dlq` (pure, no I/O).

A *transient* failure (the database unreachable, a connection dropped, a timeout) is
retried until it passes: the run stays buffered and its partition's offset stays held.
A *permanent* one is the run's own fault (a value its column cannot hold, a row that
breaks a constraint, data rows.py cannot turn into rows): retrying would hold the offset
forever, so the run is dead-lettered and dropped.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, StatementError

from agentstream.contracts import DeadLetter
from agentstream_persistence.buffers import RunBuffer

# A dead letter must fit in one Kafka record: past this, the events are listed, not copied
# (they are still in `events` from `source_offset` on, as long as its retention keeps them).
MAX_LETTER_CHARS = 256 * 1024
# The run's own data: the same rows fail the same way on every attempt.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (DataError, IntegrityError, RecursionError, ValueError, TypeError)


def is_permanent(err: BaseException) -> bool:
    if isinstance(err, PERMANENT_ERRORS):
        return True
    if isinstance(err, DBAPIError):  # operational, interface, …: the database, not the data
        return False
    # A value the driver could not even bind (SQLAlchemy's own wrapper, no database involved).
    return isinstance(err, StatementError)


def buffered_events(buf: RunBuffer) -> list[Any]:
    """Every event the buffer kept, in stream order."""
    events: list[Any] = [e for e in (buf.queued, buf.started) if e is not None]
    events += buf.assistant
    for exchange in buf.tools:
        events += [exchange.call, *([exchange.result] if exchange.result is not None else [])]
    events += buf.steps
    events += [d for deltas in buf.partial.values() for d in deltas]
    if buf.finished is not None:
        events.append(buf.finished)
    return sorted(events, key=lambda e: e.seq)


def run_dead_letter(buf: RunBuffer, topic: str, error: str, service: str) -> DeadLetter:
    """One dead letter for the whole run: `raw_value` is a JSON object with the run's buffered
    events; `source_partition`/`source_offset` say where its first event sits in `events`."""
    events = buffered_events(buf)
    body: dict[str, Any] = {"root_run_id": buf.root_run_id, "events": [e.model_dump(mode="json") for e in events]}
    raw = json.dumps(body, ensure_ascii=False)
    if len(raw) > MAX_LETTER_CHARS:
        body["events"] = [{"type": e.type, "seq": e.seq, "id": e.id} for e in events]
        body["truncated"] = True
        raw = json.dumps(body, ensure_ascii=False)[:MAX_LETTER_CHARS]
    return DeadLetter(
        source_topic=topic,
        source_partition=buf.origin.partition if buf.origin else None,
        source_offset=buf.origin.offset if buf.origin else None,
        key=buf.conversation_key,
        raw_value=raw,
        error=error,
        service=service,
    )
