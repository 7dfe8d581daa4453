"""The resume checkpoint of a run that did not complete, as plain row dicts (no I/O).

`run_checkpoints` says how the run ended, its usage so far (already billed), the seq a
resume continues after, and what the runner needs to rebuild the run; `resume_steps`
holds every completed step with its output and memory snapshot. Keys are
`root_run_id` and `(root_run_id, seq)`, so a re-read stream writes nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentstream.contracts import RunFinished
from agentstream_persistence.buffers import RunBuffer


@dataclass(frozen=True)
class CheckpointRows:
    checkpoint: dict[str, Any]
    steps: list[dict[str, Any]]


def start_info(buf: RunBuffer) -> dict[str, Any]:
    """What a resume needs to run as the same user, for the same target, in the same session."""
    started, queued = buf.started, buf.queued
    source = started or queued
    return {
        "assistant_id": started.assistant_id if started else (queued.assistant_id if queued else None),
        "connector_id": started.connector_id if started else None,
        "user_id": (started.user_id if started else None) or (queued.user_id if queued else None),
        "session_id": started.session_id if started else None,
        "reply_target": source.reply_target.model_dump(mode="json") if source else None,
        "input": [m.model_dump(mode="json") for m in started.input] if started else [],
        "text": queued.text if queued else "",
    }


def checkpoint_rows(buf: RunBuffer, fin: RunFinished) -> CheckpointRows:
    checkpoint = {
        "root_run_id": buf.root_run_id,
        "conversation_key": buf.conversation_key,
        "status": fin.status,
        "reason": fin.reason,
        "error": fin.error,
        "last_seq": max(fin.seq, buf.max_seq),
        "usage": fin.usage.model_dump(mode="json"),
        "start": start_info(buf),
        "resume_attempts": 0,
        "created_at": fin.ts,
        "updated_at": fin.ts,
    }
    steps = [
        {
            "root_run_id": buf.root_run_id,
            "run_id": s.run_id,
            "seq": s.seq,
            "step_id": s.step_id,
            "step_type": s.step_type,
            "input": s.input,
            "output": s.output,
            "memory": [m.model_dump(mode="json") for m in s.memory],
            "created_at": s.ts,
        }
        for s in buf.steps
        if s.run_id == buf.root_run_id  # a child's steps belong to its own (re-run) delegation step
    ]
    return CheckpointRows(checkpoint=checkpoint, steps=steps)
