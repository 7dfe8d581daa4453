"""What ingress decided for one inbound record. The app carries these out; nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agentstream.contracts import (
    AnswerApproval,
    InboundMessage,
    InterruptRun,
    NoticeLevel,
    ReplyTarget,
    ResetConversation,
    ResumeRun,
    RunQueued,
    StartRun,
)

RunCommandRecord = InterruptRun | ResumeRun | ResetConversation | AnswerApproval


class DropReason(StrEnum):
    DUPLICATE = "duplicate"  # (platform, id) seen before: acknowledged and dropped
    SELF_ECHO = "self_echo"  # authored by one of our own bots
    HANDLED = "handled"  # a hook marked it handled without a reply


class NoticeReason(StrEnum):
    REFUSED = "refused"
    PAIRING = "pairing"
    RATE_LIMITED = "rate_limited"
    HOOK_DENIED = "hook_denied"
    HOOK_HANDLED = "hook_handled"
    COMMAND = "command"


@dataclass(frozen=True)
class DeadLetterDecision:
    """Unusable record: to `dlq`; `notify` is where the user can be told, if known."""

    error: str
    notify: ReplyTarget | None


@dataclass(frozen=True)
class DropDecision:
    """Acknowledge the record and do nothing else: no run, no reply."""

    reason: DropReason


@dataclass(frozen=True)
class NoticeDecision:
    """Tell the user something; no run."""

    reason: NoticeReason
    text: str
    target: ReplyTarget
    level: NoticeLevel = NoticeLevel.INFO
    command: str | None = None  # set on command replies, so `command:*` hooks in delivery see them


@dataclass(frozen=True)
class CommandDecision:
    """Run commands for the runner (interrupt, resume, reset, approval answers) and an optional reply."""

    commands: tuple[RunCommandRecord, ...]
    target: ReplyTarget
    notice: str | None = None
    command: str | None = None


@dataclass(frozen=True)
class StartDecision:
    """Accepted: `start` goes to `runs` and `queued` to `events` (it opens the reply's stream)."""

    message: InboundMessage
    start: StartRun
    queued: RunQueued


Decision = DeadLetterDecision | DropDecision | NoticeDecision | CommandDecision | StartDecision


def target_of(msg: InboundMessage) -> ReplyTarget:
    return ReplyTarget(
        platform=msg.platform,
        chat_id=msg.chat_id,
        thread_id=msg.thread_id,
        reply_to_id=msg.reply_to_id,
        tenant_id=msg.user.tenant_id,
    )
