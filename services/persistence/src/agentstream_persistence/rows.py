"""What a finished buffer becomes in the database, as plain row dicts (no I/O).

Every message row is keyed by (root_run_id, seq, part): `seq` of the event it came
from, `part` its index inside that event. A re-read stream rebuilds the same keys,
so the flush can skip what is already stored.

A run that did not complete also leaves its resume checkpoint: `run_checkpoints` says how it
ended, its usage so far (already billed), the seq a resume continues after and what the
runner needs to rebuild the run; `resume_steps` holds every completed step with its output
and memory snapshot (keys `root_run_id` and `(root_run_id, seq)`).

Text is stored through `redact` (the security hook's redaction, `hooks.security.redact_storage`):
what the user and the model wrote is kept as it was shown, with secrets masked. Tool arguments
and results are redacted before they are shortened, so a cut cannot leave half a secret.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, assert_never

from agentstream.contracts import (
    NOT_RUN_REASONS,
    ArchivedEvent,
    ChatMessage,
    CheckpointStart,
    MessageCompleted,
    MessageDelta,
    MessageRole,
    MessageStarted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunStarted,
    RunStatus,
    SegmentBreak,
    ToolCall,
)
from agentstream.contracts.keys import split_conversation_key
from agentstream_persistence.buffers import RunBuffer, ToolExchange

SUMMARY_LIMIT = 200

Redact = Callable[[str], str]


def keep(text: str) -> str:
    return text


@dataclass(frozen=True)
class CheckpointRows:
    checkpoint: dict[str, Any]
    steps: list[dict[str, Any]]


def start_info(buf: RunBuffer) -> CheckpointStart:
    """What a resume needs to run as the same user, for the same target, in the same session."""
    started, queued = buf.started, buf.queued
    source = started or queued
    return CheckpointStart(
        assistant_id=started.assistant_id if started else (queued.assistant_id if queued else None),
        connector_id=started.connector_id if started else None,
        user_id=(started.user_id if started else None) or (queued.user_id if queued else None),
        tenant_id=(started.tenant_id if started else None) or (queued.tenant_id if queued else None),
        session_id=started.session_id if started else None,
        reply_target=source.reply_target if source else None,
        input=list(started.input) if started else [],
        text=queued.text if queued else "",
    )


def checkpoint_rows(buf: RunBuffer, fin: RunFinished) -> CheckpointRows:
    checkpoint = {
        "root_run_id": buf.root_run_id,
        "conversation_key": buf.conversation_key,
        "status": fin.status,
        "reason": fin.reason,
        "error": fin.error,
        "last_seq": max(fin.seq, buf.max_seq),
        "usage": fin.usage.model_dump(mode="json"),
        "start": start_info(buf).model_dump(mode="json"),
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


@dataclass(frozen=True)
class FlushRows:
    run: dict[str, Any]
    messages: list[dict[str, Any]]
    conversation: dict[str, Any]
    # Not completed: the checkpoint to write. Completed: None, and any older checkpoint is deleted.
    checkpoint: CheckpointRows | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # the visible stream, for a replay

    @property
    def completed(self) -> bool:
        return self.run["status"] == RunStatus.COMPLETED


def shorten(text: str, limit: int = SUMMARY_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_summary(exchange: ToolExchange, redact: Redact = keep) -> str:
    """`calculator({"expression": "6*7"}) → 42`: what history replays instead of the raw exchange."""
    call, result = exchange.call, exchange.result
    try:
        args = json.dumps(json.loads(call.arguments), ensure_ascii=False)
    except ValueError:
        args = call.arguments  # keep what the model wrote, even if it is not JSON
    if result is None:
        outcome = "(no result)"
    elif result.ok:
        outcome = result.content
    else:
        outcome = f"error: {result.error or result.content}"
    return f"{call.tool}({shorten(redact(args))}) → {shorten(redact(outcome))}"


def _target(buf: RunBuffer) -> ReplyTarget:
    source = buf.started or buf.queued
    if source is not None:
        return source.reply_target
    parts = split_conversation_key(buf.conversation_key)
    return ReplyTarget(
        platform=parts.platform, chat_id=parts.chat_id, thread_id=parts.thread_id, tenant_id=parts.tenant_id
    )


def _user_input(buf: RunBuffer) -> list[tuple[int, int, ChatMessage, datetime]]:
    """(seq, part, message, ts): run.started's input, else the queued text."""
    if buf.started is not None and buf.started.input:
        s = buf.started
        return [(s.seq, i, m, s.ts) for i, m in enumerate(s.input)]
    if buf.queued is not None and buf.queued.text:
        q = buf.queued
        return [(q.seq, 0, ChatMessage(role=MessageRole.USER, content=q.text), q.ts)]
    return []


def _archived(event: ArchivedEvent, redact: Redact) -> ArchivedEvent:
    """The event as it is kept: text redacted like the messages', what a chat never shows dropped."""
    match event:
        case RunStarted():
            return event.model_copy(update={"input": []})  # the user's input is in the messages
        case MessageDelta() | MessageCompleted() | Notice():
            return event.model_copy(update={"text": redact(event.text)})
        case ToolCall():
            return event.model_copy(update={"arguments": "{}"})  # a chat shows the tool's name only
        case RunFinished():
            error = redact(event.error) if event.error else event.error
            return event.model_copy(update={"text": redact(event.text), "error": error, "data": {}})
        case MessageStarted() | SegmentBreak():
            return event  # nothing in them but ids and order
        case unexpected:
            assert_never(unexpected)


def event_rows(buf: RunBuffer, redact: Redact = keep) -> list[dict[str, Any]]:
    """The run's visible stream in seq order (`contracts.replay`): what a replay re-publishes."""
    fin = buf.finished
    if fin is None or buf.started is None:
        return []  # a run that never started showed nothing but notices
    shown: list[ArchivedEvent] = [buf.started, *buf.shown, *buf.assistant, *buf.incomplete_messages(), fin]
    shown += [t.call for t in buf.tools]
    shown.sort(key=lambda e: e.seq)
    return [
        {
            "root_run_id": buf.root_run_id,
            "seq": e.seq,
            "type": e.type,
            "event": _archived(e, redact).model_dump(mode="json"),
            "created_at": e.ts,
        }
        for e in shown
    ]


def rows_for(buf: RunBuffer, redact: Redact = keep) -> FlushRows:
    fin = buf.finished
    if fin is None:
        raise ValueError(f"run {buf.root_run_id} is not finished")
    started, queued = buf.started, buf.queued
    session_id = started.session_id if started else None
    base = {"conversation_key": buf.conversation_key, "session_id": session_id, "root_run_id": buf.root_run_id}

    messages = [
        {
            **base,
            "run_id": buf.root_run_id,
            "seq": seq,
            "part": part,
            "role": m.role,
            "content": redact(m.content),
            "name": m.name,
            "tool_call_id": m.tool_call_id,
            "created_at": ts,
        }
        # A merged message is stored with the run it was merged into; a rejected one never ran.
        for seq, part, m, ts in (_user_input(buf) if fin.reason not in NOT_RUN_REASONS else [])
    ]
    messages += [
        {
            **base,
            "run_id": m.run_id,
            "seq": m.seq,
            "part": 0,
            "role": "assistant",
            "content": redact(m.text),
            "name": None,
            "tool_call_id": None,
            "created_at": m.ts,
        }
        for m in buf.assistant
        if m.text  # a turn that only called tools has no text worth keeping
    ]
    messages += [
        {
            **base,
            "run_id": t.call.run_id,
            "seq": t.call.seq,
            "part": 0,
            "role": MessageRole.TOOL,
            "content": tool_summary(t, redact),
            "name": t.call.tool,
            "tool_call_id": t.call.call_id,
            "created_at": t.call.ts,
        }
        for t in buf.tools
    ]
    # Text streamed before an interrupt or a lost runner is kept: what the user saw.
    messages += [
        {
            **base,
            "run_id": d.run_id,
            "seq": d.seq,
            "part": 0,
            "role": "assistant",
            "content": redact(d.text),
            "name": None,
            "tool_call_id": None,
            "created_at": d.ts,
        }
        for d in buf.incomplete_messages()
    ]
    messages.sort(key=lambda r: (r["seq"], r["part"]))
    if started is not None and not started.store_history:
        messages = []  # `skip.history`: neither loaded nor stored; the run row still records it

    started_at = started.ts if started else (queued.ts if queued else fin.ts)
    run = {
        "run_id": buf.root_run_id,
        "root_run_id": buf.root_run_id,
        "parent_run_id": None,
        "conversation_key": buf.conversation_key,
        "session_id": session_id,
        "assistant_id": started.assistant_id if started else (queued.assistant_id if queued else None),
        "connector_id": started.connector_id if started else None,
        "user_id": (started.user_id if started else None) or (queued.user_id if queued else None),
        "tenant_id": (started.tenant_id if started else None) or (queued.tenant_id if queued else None),
        "status": fin.status,
        "error": redact(fin.error) if fin.error else fin.error,
        "reason": fin.reason,
        "text": redact(fin.text),
        "prompt_tokens": fin.usage.prompt_tokens,
        "completion_tokens": fin.usage.completion_tokens,
        "llm_calls": fin.usage.llm_calls,
        "duration_ms": fin.duration_ms,
        "started_at": started_at,
        "finished_at": fin.ts,
    }
    target = _target(buf)
    conversation = {
        "key": buf.conversation_key,
        "platform": target.platform,
        "chat_id": target.chat_id,
        "thread_id": target.thread_id,
        "session_id": session_id,
        "created_at": started_at,
        "updated_at": fin.ts,
    }
    resumable = fin.status is not RunStatus.COMPLETED and fin.reason not in NOT_RUN_REASONS
    checkpoint = checkpoint_rows(buf, fin) if resumable else None
    return FlushRows(
        run=run, messages=messages, conversation=conversation, checkpoint=checkpoint, events=event_rows(buf, redact)
    )
