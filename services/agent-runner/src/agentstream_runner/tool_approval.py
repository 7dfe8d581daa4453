"""The approval gate in front of a round of tool calls.

Calls of tools the catalogue marks `requires_approval` do not run until a person answers.
The run pauses at them: an `approval` step whose output is the `ApprovalRequest` (the
checkpoint: a run resumed after a restart waits for the same request until the same deadline),
then a notice telling the chat what would run and how to answer. Approved: the round runs as
usual. Denied or expired: each of those calls gets a non-retryable tool error and the run goes
on (the model answers without them). See docs/tools.md § Approval.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import assert_never

from agentstream.config import RunnerTexts
from agentstream.contracts import (
    AnswerApproval,
    ApprovalOutcome,
    ApprovalRequest,
    Notice,
    NoticeLevel,
    PendingCall,
    StepType,
    ToolCallResult,
    ToolCallSpec,
    new_id,
    shown_arguments,
    utcnow,
)
from agentstream.contracts.steps import ApprovalStepInput
from agentstream_runner.approvals import PendingApproval
from agentstream_runner.emitter import step
from agentstream_runner.scope import RunScope

DENIED_ERROR = "denied by user"
EXPIRED_ERROR = "not run: nobody approved it in time"


def prompt_text(request: ApprovalRequest, expiry_s: float, texts: RunnerTexts) -> str:
    lines = [texts.approval_needed]
    lines += [texts.fill("approval_call", tool=c.tool, arguments=c.arguments) for c in request.calls]
    lines.append(texts.fill("approval_answer", expires=_duration(expiry_s)))
    return "\n".join(lines)


def not_yours_text(request: ApprovalRequest, answer: AnswerApproval, texts: RunnerTexts) -> str:
    return texts.fill("approval_not_yours", user=request.user_id or "unknown", command=answer.decision.value)


def outcome_text(pending: PendingApproval, expiry_s: float, texts: RunnerTexts) -> str:
    tools = ", ".join(c.tool for c in pending.request.calls)
    outcome = pending.outcome
    match outcome:
        case ApprovalOutcome.APPROVED:
            return texts.fill("approved", user=pending.answered_by, tools=tools)
        case ApprovalOutcome.DENIED:
            return texts.fill("denied", user=pending.answered_by, tools=tools)
        case ApprovalOutcome.EXPIRED:
            return texts.fill("expired", tools=tools, expires=_duration(expiry_s))
        case None:
            raise ValueError("still pending")
        case _:
            assert_never(outcome)


def _texts(scope: RunScope) -> RunnerTexts:
    return scope.ctx.runner.texts_for(scope.start.reply_target.platform)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def refused(scope: RunScope, call: ToolCallSpec, outcome: ApprovalOutcome) -> ToolCallResult:
    error = DENIED_ERROR if outcome is ApprovalOutcome.DENIED else EXPIRED_ERROR
    return scope.failed_call(call, error, retryable=False)


@dataclass(frozen=True)
class GateOutcome:
    """`refused`: the results of calls that may not run, by call id; `approved`: the approval id of
    each call a person approved (the executor is shown it, signed: docs/tools.md § Which calls run)."""

    refused: dict[str, ToolCallResult] = field(default_factory=dict)
    approved: dict[str, str] = field(default_factory=dict)


async def approval_gate(scope: RunScope, calls: list[ToolCallSpec]) -> GateOutcome:
    """Which of `calls` may run (none refused: every call may run)."""
    # A resumed run's checkpoint says which calls wait, even before this runner has read the catalogue.
    waited = scope.resumed_approval.call_ids if scope.resumed_approval is not None else frozenset()
    needing = [c for c in calls if c.id in waited or scope.ctx.tools.requires_approval(c.name)]
    if not needing:
        return GateOutcome()
    request = _resumed(scope, needing) or await _request(scope, needing)
    outcome = await _wait(scope, PendingApproval(request))
    if outcome is ApprovalOutcome.APPROVED:
        return GateOutcome(approved={c.id: request.approval_id for c in needing})
    return GateOutcome(refused={c.id: refused(scope, c, outcome) for c in needing})


def _resumed(scope: RunScope, needing: list[ToolCallSpec]) -> ApprovalRequest | None:
    """The request a resumed run was waiting for, when these are its calls (used once)."""
    request, scope.resumed_approval = scope.resumed_approval, None
    if request is not None and request.call_ids == {c.id for c in needing}:
        return request
    return None


async def _request(scope: RunScope, needing: list[ToolCallSpec]) -> ApprovalRequest:
    expiry_s = scope.ctx.runner.approval_expiry_s
    request = ApprovalRequest(
        approval_id=new_id(),
        calls=[PendingCall(call_id=c.id, tool=c.name, arguments=shown_arguments(c.arguments)) for c in needing],
        user_id=scope.start.user.id if scope.start.user else None,
        tenant_id=scope.start.user.tenant_id if scope.start.user else None,
        expires_at=utcnow() + timedelta(seconds=expiry_s),
    )
    step_input = ApprovalStepInput(calls=[c.id for c in needing]).as_json()
    async with step(scope.events, StepType.APPROVAL, scope.step_id(StepType.APPROVAL), step_input) as record:
        record.output = request.model_dump(mode="json")
        record.memory = scope.memory  # ends in the calls: a resume comes back to this gate
    await scope.events.confirm()  # the checkpoint is stored before anyone is asked
    await _notice(scope, prompt_text(request, expiry_s, _texts(scope)), NoticeLevel.WARNING, approval=request)
    return request


async def _wait(scope: RunScope, pending: PendingApproval) -> ApprovalOutcome:
    with scope.ctx.approvals.waiting(scope.start.conversation_key) as answers:
        while pending.outcome is None:
            remaining_s = pending.remaining_s(utcnow())
            if remaining_s <= 0:
                pending.expire()
                break
            try:
                answer = await asyncio.wait_for(answers.get(), remaining_s)
            except TimeoutError:
                continue  # the loop expires it
            if not pending.answer(answer):
                await _notice(scope, not_yours_text(pending.request, answer, _texts(scope)), NoticeLevel.WARNING)
    outcome = pending.outcome
    assert outcome is not None
    text = outcome_text(pending, scope.ctx.runner.approval_expiry_s, _texts(scope))
    await _notice(scope, text, NoticeLevel.INFO, outcome=outcome)
    return outcome


async def _notice(
    scope: RunScope,
    text: str,
    level: NoticeLevel,
    approval: ApprovalRequest | None = None,
    outcome: ApprovalOutcome | None = None,
) -> None:
    await scope.events.emit(
        Notice,
        level=level,
        text=text,
        reply_target=scope.start.reply_target,
        approval=approval,
        approval_outcome=outcome,
    )
