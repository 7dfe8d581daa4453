"""Pairing codes, the pure part: generation, hashing, and what a request or approval leads to.

A code is 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L), ~40 bits;
only its SHA-256 is stored. The rules: a code expires after
`code_ttl_s`; a user gets at most one new code per `issue_interval_s`; `max_failures`
failed approvals lock pairing for the platform for `lockout_s`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from agentstream.config.ingress import IngressTexts, PairingSettings

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
ANY_PLATFORM = "*"  # failures of approvals that did not name a platform


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize(code: str) -> str:
    return code.strip().upper().replace("-", "").replace(" ", "")


def hash_code(code: str) -> str:
    return hashlib.sha256(normalize(code).encode()).hexdigest()


class IssueOutcome(StrEnum):
    ISSUED = "issued"
    TOO_SOON = "too_soon"  # a code was issued to this user less than issue_interval_s ago
    LOCKED = "locked"  # too many failed approvals on this platform


class ApproveOutcome(StrEnum):
    APPROVED = "approved"
    UNKNOWN = "unknown"  # no such code (counts as a failure)
    EXPIRED = "expired"  # counts as a failure
    LOCKED = "locked"


@dataclass(frozen=True)
class Issue:
    """What a pairing request led to; the code is only here (and told to the user) when issued."""

    outcome: IssueOutcome
    code: str | None = None  # only when ISSUED; never stored
    expires_at: datetime | None = None


@dataclass(frozen=True)
class Approval:
    """What `pairing approve` led to; when approved, the platform and user now allowed."""

    outcome: ApproveOutcome
    platform: str | None = None
    user_id: str | None = None


def may_issue(
    last_issued: datetime | None, locked_until: datetime | None, now: datetime, settings: PairingSettings
) -> IssueOutcome:
    if locked_until is not None and locked_until > now:
        return IssueOutcome.LOCKED
    if last_issued is not None and now - last_issued < timedelta(seconds=settings.issue_interval_s):
        return IssueOutcome.TOO_SOON
    return IssueOutcome.ISSUED


def notice_text(issue: Issue, settings: PairingSettings, texts: IngressTexts) -> str:
    match issue.outcome:
        case IssueOutcome.ISSUED:
            return texts.fill("pairing_code", code=issue.code, minutes=round(settings.code_ttl_s / 60))
        case IssueOutcome.TOO_SOON:
            return texts.pairing_pending
        case IssueOutcome.LOCKED:
            return texts.pairing_locked
