"""The pending approval's state machine and the waiters answers are handed to."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from agentstream.contracts import (
    AnswerApproval,
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalRequest,
    PendingCall,
    ReplyTarget,
)
from agentstream_runner.approvals import ApprovalState, ApprovalWaiters, NotPending, PendingApproval

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def pending(user: str | None = "u1", tenant: str | None = None) -> PendingApproval:
    calls = [PendingCall(call_id="c1", tool="shell", arguments='{"command": "ls"}')]
    return PendingApproval(
        ApprovalRequest(
            approval_id="a1", calls=calls, user_id=user, tenant_id=tenant, expires_at=NOW + timedelta(minutes=10)
        )
    )


def answer(
    decision: ApprovalDecision, user: str, admin: bool = False, key: str = "web:c1", tenant: str | None = None
) -> AnswerApproval:
    return AnswerApproval(
        conversation_key=key,
        decision=decision,
        user_id=user,
        tenant_id=tenant,
        admin=admin,
        reply_target=ReplyTarget(platform="web", chat_id="c1"),
    )


@pytest.mark.parametrize(
    ("decision", "state"),
    [(ApprovalDecision.APPROVE, ApprovalState.APPROVED), (ApprovalDecision.DENY, ApprovalState.DENIED)],
)
def test_the_runs_user_ends_it(decision, state):
    p = pending()
    assert p.answer(answer(decision, "u1")) is True
    assert (p.state, p.answered_by, p.outcome) == (state, "u1", ApprovalOutcome(state.value))


def test_an_admin_may_answer_anyones_request():
    p = pending()
    assert p.answer(answer(ApprovalDecision.DENY, "boss", admin=True)) is True
    assert p.outcome is ApprovalOutcome.DENIED and p.answered_by == "boss"


def test_another_users_answer_does_not_count_and_it_stays_pending():
    p = pending()
    assert p.answer(answer(ApprovalDecision.APPROVE, "mallory")) is False
    assert p.state is ApprovalState.PENDING and p.outcome is None and p.answered_by is None


def test_only_the_runs_tenant_counts_its_user_and_its_admins_alike():
    p = pending(tenant="acme")
    assert p.answer(answer(ApprovalDecision.APPROVE, "u1", tenant="beta")) is False  # beta's u1 is another user
    assert p.answer(answer(ApprovalDecision.APPROVE, "boss", admin=True, tenant="beta")) is False
    assert p.answer(answer(ApprovalDecision.APPROVE, "u1")) is False  # the default tenant's u1 too
    assert p.state is ApprovalState.PENDING
    assert p.answer(answer(ApprovalDecision.APPROVE, "u1", tenant="acme")) is True
    # No tenant on either side is the default tenant's (a checkpoint from before the field).
    assert pending().answer(answer(ApprovalDecision.DENY, "u1", tenant="default")) is True


def test_a_run_without_a_user_can_only_be_answered_by_an_admin():
    p = pending(user=None)
    assert p.answer(answer(ApprovalDecision.APPROVE, "u1")) is False
    assert p.answer(answer(ApprovalDecision.APPROVE, "boss", admin=True)) is True


def test_expiry_and_nothing_after_an_ending():
    p = pending()
    assert p.remaining_s(NOW) == 600
    p.expire()
    assert p.outcome is ApprovalOutcome.EXPIRED
    with pytest.raises(NotPending):
        p.answer(answer(ApprovalDecision.APPROVE, "u1"))
    with pytest.raises(NotPending):
        p.expire()


async def test_waiters_hand_answers_to_the_conversation_waiting_only():
    waiters = ApprovalWaiters()
    assert not waiters.deliver(answer(ApprovalDecision.APPROVE, "u1"))
    with waiters.waiting("web:c1") as queue:
        assert len(waiters) == 1
        assert not waiters.deliver(answer(ApprovalDecision.APPROVE, "u1", key="web:other"))
        assert waiters.deliver(answer(ApprovalDecision.DENY, "u1"))
        got = await asyncio.wait_for(queue.get(), 1)
        assert got.decision is ApprovalDecision.DENY
    assert len(waiters) == 0
    assert not waiters.deliver(answer(ApprovalDecision.APPROVE, "u1"))
