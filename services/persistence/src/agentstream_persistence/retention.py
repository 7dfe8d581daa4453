"""persistence's retention: the stored history — messages, runs and the resume state of purged
runs — once older than `retention.history_days` (0, the default, keeps it forever: it is the
users' history, and deleting it is the operator's decision).

A run is kept while ingress still remembers its id (the last runs of a conversation, for
`/status`): a missing run would read as "still queued" there. Ingress forgets them once the
conversation has been idle that long (its own retention), so idle conversations empty fully.
Resume steps, checkpoints and archived events go with their run, and before it, so a pass that stops half-way
leaves nothing that the next pass would not find.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, Text, cast, exists, literal, not_, or_, select

from agentstream.config import Settings
from agentstream.db import Message, Run
from agentstream.db.models_ingress import IngressConversation
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint, RunEventRow
from agentstream.retention import Purge, cutoff, table_of


def _run_due(before: datetime) -> ColumnElement[bool]:
    run, conversation = table_of(Run), table_of(IngressConversation)
    remembered = exists().where(
        conversation.c.key == run.c.conversation_key,
        cast(conversation.c.pending_runs, Text).like(literal("%") + run.c.run_id + literal("%")),
    )
    return (run.c.finished_at < before) & not_(remembered)


def persistence_purges(settings: Settings, now: datetime) -> list[Purge]:
    days = settings.retention.history_days
    if not days:
        return []
    before = cutoff(now, days)
    run, message = table_of(Run), table_of(Message)
    steps, checkpoints, events = table_of(ResumeStep), table_of(RunCheckpoint), table_of(RunEventRow)
    due_runs = select(run.c.run_id).where(_run_due(before))

    def of_purged_run(root_run_id: ColumnElement[str]) -> ColumnElement[bool]:
        # Its run is due now, or already gone (a pass that stopped between the tables).
        return or_(root_run_id.in_(due_runs), not_(exists().where(run.c.run_id == root_run_id)))

    return [
        Purge(steps, (steps.c.created_at < before) & of_purged_run(steps.c.root_run_id)),
        Purge(events, (events.c.created_at < before) & of_purged_run(events.c.root_run_id)),
        Purge(checkpoints, (checkpoints.c.updated_at < before) & of_purged_run(checkpoints.c.root_run_id)),
        Purge(message, message.c.created_at < before),
        Purge(run, _run_due(before)),
    ]
