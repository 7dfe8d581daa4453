"""Pairing codes in the database: issue, approve (the `agentstream pairing approve` command), look up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config import Settings
from agentstream.config.ingress import PairingSettings
from agentstream.db import create_engine, session_factory, upgrade
from agentstream.db.models_ingress import PairedUser, PairingCode, PairingLock
from agentstream_ingress.pairing import (
    ANY_PLATFORM,
    Approval,
    ApproveOutcome,
    Issue,
    IssueOutcome,
    hash_code,
    may_issue,
    new_code,
)


def _aware(ts: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every stored time is UTC."""
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


async def _locked_until(session: AsyncSession, platform: str) -> datetime | None:
    rows = await session.scalars(
        select(PairingLock.locked_until).where(PairingLock.platform.in_([platform, ANY_PLATFORM]))
    )
    times = [t for t in (_aware(r) for r in rows) if t is not None]
    return max(times) if times else None


class PairingStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: PairingSettings) -> None:
        self.sessions = sessions
        self.settings = settings

    async def is_paired(self, platform: str, user_id: str) -> bool:
        async with self.sessions() as s:
            return await s.get(PairedUser, (platform, user_id)) is not None

    async def issue(self, platform: str, user_id: str, chat_id: str, now: datetime | None = None) -> Issue:
        now = now or datetime.now(UTC)
        async with self.sessions() as s, s.begin():
            last = _aware(
                await s.scalar(
                    select(func.max(PairingCode.issued_at)).where(
                        PairingCode.platform == platform, PairingCode.user_id == user_id
                    )
                )
            )
            outcome = may_issue(last, await _locked_until(s, platform), now, self.settings)
            if outcome is not IssueOutcome.ISSUED:
                return Issue(outcome)
            code = new_code()
            expires = now + timedelta(seconds=self.settings.code_ttl_s)
            s.add(
                PairingCode(
                    code_hash=hash_code(code),
                    platform=platform,
                    user_id=user_id,
                    chat_id=chat_id,
                    issued_at=now,
                    expires_at=expires,
                    approved_at=None,
                )
            )
        return Issue(IssueOutcome.ISSUED, code, expires)

    async def approve(self, code: str, platform: str | None = None, now: datetime | None = None) -> Approval:
        """Approve `code`. A wrong or expired code is a failure counted against its platform
        (the given one, or `*` — which locks every platform — when none was given)."""
        now = now or datetime.now(UTC)
        async with self.sessions() as s, s.begin():
            row = await s.get(PairingCode, hash_code(code))
            if row is not None and platform is not None and row.platform != platform:
                row = None  # a code of another platform is as good as no code here
            scope = platform or (row.platform if row is not None else ANY_PLATFORM)
            locked = await _locked_until(s, scope)
            if locked is not None and locked > now:
                return Approval(ApproveOutcome.LOCKED, scope)
            if row is None:
                outcome = ApproveOutcome.UNKNOWN
            elif (_aware(row.expires_at) or now) <= now or row.approved_at is not None:
                outcome = ApproveOutcome.EXPIRED
            else:
                row.approved_at = now
                if await s.get(PairedUser, (row.platform, row.user_id)) is None:
                    s.add(PairedUser(platform=row.platform, user_id=row.user_id, approved_at=now))
                return Approval(ApproveOutcome.APPROVED, row.platform, row.user_id)
            await self._fail(s, scope, now)
        return Approval(outcome, scope)

    async def _fail(self, s: AsyncSession, scope: str, now: datetime) -> None:
        lock = await s.get(PairingLock, scope)
        if lock is None:
            lock = PairingLock(platform=scope, failures=0, locked_until=None)
            s.add(lock)
        lock.failures += 1
        if lock.failures >= self.settings.max_failures:
            lock.locked_until = now + timedelta(seconds=self.settings.lockout_s)
            lock.failures = 0  # a new window after the lockout


async def approve_with_settings(settings: Settings, code: str, platform: str | None = None) -> Approval:
    """`agentstream pairing approve CODE`: one approval against the configured database."""
    await upgrade(settings.database.url)
    engine = create_engine(settings.database.url)
    try:
        return await PairingStore(session_factory(engine), settings.authz.pairing).approve(code, platform)
    finally:
        await engine.dispose()
