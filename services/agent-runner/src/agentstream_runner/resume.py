"""Resume: rebuild a failed or interrupted run from its checkpoint.

persistence writes the checkpoint when the run ends not `completed`: how it ended,
the usage already spent, the last seq, what started it, and every completed step
with its memory snapshot. A resume continues under the same run id, numbering its
events after the last seq, from the newest memory the model can be called with:
- after a `tool` step: the tool results are in memory, the next model call follows;
- after an `llm` step that called tools whose round did not complete: its memory ends
  in an assistant message with unanswered tool calls, which no model API accepts, so
  the resume goes back to the step before it (that one call is made again);
- after an `approval` step (the run ended while tool calls waited for `/approve`): its
  memory, and the round waits for the same request until the same deadline;
- with no usable step: system prompts + history (without this run's own rows) + the
  run's input, as the run first saw them.
Completed model and tool calls are never requested again; their usage is carried
over (`ResumePoint.usage`), so `run.finished` reports the whole run's usage.

A resume numbers its events after the checkpoint's `last_seq`, so a checkpoint is resumed from
once (`resume_verdict`): a ResumeRun read again after its resume had begun elsewhere waits for the
checkpoint of that resume's ending, and one arriving after this runner resumed from the same
checkpoint is a repeat (docs/decisions.md § Orphaned runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Container
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.contracts import (
    ApprovalRequest,
    ChatMessage,
    CheckpointStart,
    MessageRole,
    ReplyTarget,
    ResumeRun,
    RunOptions,
    StartRun,
    StepType,
    Usage,
    User,
)
from agentstream.contracts.keys import ConversationParts, split_conversation_key
from agentstream.db.models import Run
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint

CHECKPOINT_WAIT_S = 5.0  # a resume may arrive before persistence has written the checkpoint


@dataclass(frozen=True)
class SavedStep:
    step_id: str
    step_type: str
    memory: list[ChatMessage]
    output: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Checkpoint:
    root_run_id: str
    conversation_key: str
    status: str
    last_seq: int
    usage: Usage
    start: CheckpointStart
    steps: list[SavedStep] = field(default_factory=list)


def callable_memory(steps: list[SavedStep]) -> list[ChatMessage] | None:
    """The newest snapshot a model call can continue from (see the module doc)."""
    for saved in reversed(steps):
        if not saved.memory:
            continue
        last = saved.memory[-1]
        if last.role == MessageRole.ASSISTANT and last.tool_calls:
            continue  # its tool round never completed
        return list(saved.memory)
    return None


@dataclass(frozen=True)
class PausedAtApproval:
    """The run ended while its tool calls waited for approval: it continues waiting."""

    request: ApprovalRequest
    memory: list[ChatMessage]  # ends in the assistant message that made the calls


def paused_at_approval(steps: list[SavedStep]) -> PausedAtApproval | None:
    """When the newest step is an `approval` step, the request it waits for and its memory."""
    if not steps or steps[-1].step_type != StepType.APPROVAL:
        return None
    saved = steps[-1]
    if not saved.memory or not saved.memory[-1].tool_calls:
        return None
    return PausedAtApproval(ApprovalRequest.model_validate(saved.output), list(saved.memory))


class ResumeVerdict(StrEnum):
    RESUME = "resume"
    NO_CHECKPOINT = "no_checkpoint"  # completed (its checkpoint deleted), or an unknown run
    BEHIND = "behind"  # a resume begun since went past the checkpoint: its seqs are that resume's
    REPEAT = "repeat"  # this runner resumed from this very checkpoint already


def resume_verdict(
    checkpoint: Checkpoint | None, resumed_up_to: int | None, resumed_here: Container[tuple[str, int]]
) -> ResumeVerdict:
    """Whether a ResumeRun continues from `checkpoint`. `resumed_up_to`: the seq a resume of the run
    that had begun on a runner which died was ended at (`TakenRuns.resumed_up_to`), or None;
    `resumed_here`: the (run id, last seq) of the checkpoints this runner resumed from."""
    if checkpoint is None:
        return ResumeVerdict.NO_CHECKPOINT
    if resumed_up_to is not None and checkpoint.last_seq < resumed_up_to:
        return ResumeVerdict.BEHIND
    if (checkpoint.root_run_id, checkpoint.last_seq) in resumed_here:
        return ResumeVerdict.REPEAT
    return ResumeVerdict.RESUME


def start_of(command: ResumeRun, checkpoint: Checkpoint) -> StartRun:
    """The StartRun the run began with, as far as the checkpoint remembers it."""
    info = checkpoint.start
    text = next((m.content for m in info.input if m.role == MessageRole.USER), None) or info.text
    parts = split_conversation_key(command.conversation_key)
    tenant = info.tenant_id or parts.tenant_id  # the key has it when the checkpoint predates the field
    return StartRun(
        run_id=command.run_id,
        conversation_key=command.conversation_key,
        session_id=info.session_id,
        assistant_id=info.assistant_id or "default",
        user=User(id=info.user_id, tenant_id=tenant) if info.user_id else None,
        text=text,
        reply_target=info.reply_target or _target_of(parts),
        options=RunOptions(connector=info.connector_id) if info.connector_id else RunOptions(),
    )


def saved_input(checkpoint: Checkpoint, start: StartRun) -> list[ChatMessage]:
    return list(checkpoint.start.input) or [ChatMessage(role=MessageRole.USER, content=start.text)]


def _target_of(parts: ConversationParts) -> ReplyTarget:
    return ReplyTarget(
        platform=parts.platform, chat_id=parts.chat_id, thread_id=parts.thread_id, tenant_id=parts.tenant_id
    )


# -- database reads ------------------------------------------------------------------
async def run_stored(sessions: async_sessionmaker[AsyncSession], run_id: str) -> bool:
    """Whether persistence stored `run_id` (it writes a run's row when the run ends): a StartRun of
    such a run, read again, is not started afresh — it ran; a ResumeRun continues it."""
    async with sessions() as session:
        return (await session.scalar(select(Run.run_id).where(Run.run_id == run_id))) is not None


async def read_checkpoint(sessions: async_sessionmaker[AsyncSession], run_id: str) -> Checkpoint | None:
    async with sessions() as session:
        row = await session.get(RunCheckpoint, run_id)
        if row is None:
            return None
        steps = (
            await session.scalars(select(ResumeStep).where(ResumeStep.root_run_id == run_id).order_by(ResumeStep.seq))
        ).all()
    return Checkpoint(
        root_run_id=row.root_run_id,
        conversation_key=row.conversation_key,
        status=row.status,
        last_seq=row.last_seq,
        usage=Usage.model_validate(row.usage or {}),
        start=CheckpointStart.model_validate(row.start or {}),
        steps=[
            SavedStep(s.step_id, s.step_type, [ChatMessage.model_validate(m) for m in s.memory], dict(s.output or {}))
            for s in steps
        ],
    )


async def load_checkpoint(
    sessions: async_sessionmaker[AsyncSession], run_id: str, wait_s: float = CHECKPOINT_WAIT_S, at_least: int = -1
) -> Checkpoint | None:
    """The run's checkpoint, waiting up to `wait_s` for persistence to write it (one whose `last_seq`
    is `at_least` or more: the ending of a resume begun since is written after the first)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        checkpoint = await read_checkpoint(sessions, run_id)
        if (checkpoint is not None and checkpoint.last_seq >= at_least) or loop.time() >= deadline:
            return checkpoint
        await asyncio.sleep(0.2)
