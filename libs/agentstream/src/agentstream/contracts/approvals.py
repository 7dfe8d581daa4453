"""Approval of dangerous tool calls: the shared vocabulary of ingress, runner and delivery.

A tool whose catalogue entry says `requires_approval` does not run when the model calls it:
the run pauses at the call, tells the chat what would run (a `Notice` carrying an
`ApprovalRequest`), and waits for `/approve` or `/deny` (an `AnswerApproval` on `runs`) until
the request expires (docs/tools.md § Approval).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from agentstream.contracts.base import Value
from agentstream.contracts.limits import Name, Subject

# What the chat shows of a call's arguments: enough to judge it, never a wall of text.
ARGUMENTS_SHOWN_CHARS = 300


class ApprovalDecision(StrEnum):
    """What a person answered."""

    APPROVE = "approve"
    DENY = "deny"


class ApprovalOutcome(StrEnum):
    """How a pending approval ended; anything but `approved` gives the model a tool error."""

    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


class PendingCall(Value):
    """One call waiting for approval, as the chat shows it."""

    call_id: Name
    tool: Name
    arguments: str = Field(description=f"The raw arguments, cut to {ARGUMENTS_SHOWN_CHARS} characters.")


class ApprovalRequest(Value):
    """A run paused at tool calls that need approval: the `approval` step's output (so a resumed
    run waits for the same request until the same deadline) and the payload of its notice."""

    approval_id: Name
    calls: list[PendingCall] = Field(min_length=1)
    user_id: Subject | None = Field(description="Who may answer (besides an admin): the run's user.")
    tenant_id: Subject | None = Field(
        default=None, description="The run's tenant (none: `default`): only its users' answers count."
    )
    expires_at: datetime = Field(description="Unanswered by then: the calls are refused as expired.")

    @property
    def call_ids(self) -> frozenset[str]:
        return frozenset(c.call_id for c in self.calls)


def shown_arguments(arguments: str) -> str:
    """The arguments as the chat shows them: cut with a marker past `ARGUMENTS_SHOWN_CHARS`."""
    if len(arguments) <= ARGUMENTS_SHOWN_CHARS:
        return arguments
    return arguments[:ARGUMENTS_SHOWN_CHARS] + f"… [{len(arguments)} characters in all]"
