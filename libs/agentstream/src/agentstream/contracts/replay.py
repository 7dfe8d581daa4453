"""Replaying a finished run: its visible stream re-published under a new root id, for a new target.

A replay is not a new record type on the wire: it is the run's own events (`events` topic), as
persistence archived them (`run_events` table), with a new identity — the replay id as root run id,
the target's conversation key, the new reply target — and `run.started.replay_of` naming the
original. Delivery streams it like any run (its own ledger scope: the replay id), so the original's
ledger rows are never touched; persistence stores nothing of a replay, and delivery neither lets it
supersede the chat's current run nor relays it (docs/delivery.md).
"""

from __future__ import annotations

from agentstream.contracts.base import new_id
from agentstream.contracts.common import ReplyTarget, Usage
from agentstream.contracts.events import (
    MessageCompleted,
    MessageDelta,
    MessageStarted,
    Notice,
    RunFinished,
    RunStarted,
    SegmentBreak,
    ToolCall,
)

# What a chat shows of a run, and so what a run's archive keeps (in `seq` order). A message that
# completed is kept as its `message.completed` alone (its deltas only led up to that text); one
# that never completed as a single delta with all its text.
ArchivedEvent = (
    RunStarted | MessageStarted | MessageDelta | MessageCompleted | ToolCall | SegmentBreak | Notice | RunFinished
)
ARCHIVED_TYPES = (
    RunStarted,
    MessageStarted,
    MessageDelta,
    MessageCompleted,
    ToolCall,
    SegmentBreak,
    Notice,
    RunFinished,
)


def replayed(event: ArchivedEvent, replay_id: str, target: ReplyTarget) -> ArchivedEvent:
    """One archived event as the replay's: the replay's root id, conversation and target.

    `seq` and `depth` stay (the order and the tree are the original's); the original root's own
    `run_id` becomes the replay id, a child's stays (it is unique to its delegation).
    """
    original = event.root_run_id

    def mapped(run_id: str | None) -> str | None:
        return replay_id if run_id == original else run_id

    update: dict[str, object] = {
        "id": new_id(),
        "run_id": mapped(event.run_id),
        "root_run_id": replay_id,
        "parent_run_id": mapped(event.parent_run_id),
        "conversation_key": target.conversation_key,
        "epoch": 0,
    }
    if isinstance(event, RunStarted):
        update |= {"reply_target": target, "replay_of": original, "store_history": False, "input": []}
    elif isinstance(event, Notice):
        update["reply_target"] = target
    elif isinstance(event, RunFinished):
        update["usage"] = Usage()  # the replay called no model: nothing to bill again
    copy = event.model_copy(update=update)
    return type(event).model_validate(copy.model_dump())  # checked like a record read off the topic
