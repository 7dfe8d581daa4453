"""Pending tool approvals: one request's state machine, and where answers find it.

    PENDING → APPROVED   an `/approve` from the run's user or an admin, of the run's tenant
            → DENIED     a `/deny` from the run's user or an admin, of the run's tenant
            → EXPIRED    nobody answered by `expires_at`

An answer from anyone else leaves it PENDING (`counts`; the chat is told why). `expires_at` is a wall
clock time written in the run's checkpoint, so a run resumed after a restart waits until the
same deadline, not a new one (docs/tools.md § Approval).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from agentstream.contracts import AnswerApproval, ApprovalDecision, ApprovalOutcome, ApprovalRequest
from agentstream.contracts.keys import DEFAULT_TENANT


class ApprovalState(StrEnum):
    PENDING = "pending"
    APPROVED = ApprovalOutcome.APPROVED.value
    DENIED = ApprovalOutcome.DENIED.value
    EXPIRED = ApprovalOutcome.EXPIRED.value


ANSWERED = {ApprovalDecision.APPROVE: ApprovalState.APPROVED, ApprovalDecision.DENY: ApprovalState.DENIED}


class NotPending(Exception):
    """An answer or expiry after the request already ended."""


@dataclass
class PendingApproval:
    request: ApprovalRequest
    state: ApprovalState = ApprovalState.PENDING
    answered_by: str | None = None

    def counts(self, answer: AnswerApproval) -> bool:
        """Whether `answer` may end the request: the run's user's or an admin's, and of the run's tenant
        (user ids are only unique inside a tenant; the conversation key keeps tenants apart already)."""
        if (answer.tenant_id or DEFAULT_TENANT) != (self.request.tenant_id or DEFAULT_TENANT):
            return False
        return answer.admin or (self.request.user_id is not None and answer.user_id == self.request.user_id)

    def answer(self, answer: AnswerApproval) -> bool:
        """Apply an answer: True when it ended the request, False when it does not count."""
        if self.state is not ApprovalState.PENDING:
            raise NotPending(self.state)
        if not self.counts(answer):
            return False
        self.state = ANSWERED[answer.decision]
        self.answered_by = answer.user_id
        return True

    def expire(self) -> None:
        if self.state is not ApprovalState.PENDING:
            raise NotPending(self.state)
        self.state = ApprovalState.EXPIRED

    def remaining_s(self, now: datetime) -> float:
        return (self.request.expires_at - now).total_seconds()

    @property
    def outcome(self) -> ApprovalOutcome | None:
        return None if self.state is ApprovalState.PENDING else ApprovalOutcome(self.state.value)


class ApprovalWaiters:
    """The runs waiting for an answer, by conversation (one run of a conversation runs at a time);
    the `runs` handler hands each `AnswerApproval` to the one waiting."""

    def __init__(self) -> None:
        self._queues: dict[str, asyncio.Queue[AnswerApproval]] = {}

    @contextmanager
    def waiting(self, conversation_key: str) -> Iterator[asyncio.Queue[AnswerApproval]]:
        queue: asyncio.Queue[AnswerApproval] = asyncio.Queue()
        self._queues[conversation_key] = queue
        try:
            yield queue
        finally:
            if self._queues.get(conversation_key) is queue:
                del self._queues[conversation_key]

    def deliver(self, answer: AnswerApproval) -> bool:
        """False when no run of the conversation waits for an approval."""
        queue = self._queues.get(answer.conversation_key)
        if queue is None:
            return False
        queue.put_nowait(answer)
        return True

    def __len__(self) -> int:
        return len(self._queues)
