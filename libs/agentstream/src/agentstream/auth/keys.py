"""API keys: `agsk_<key id>_<secret>`, stored as the sha256 of the secret.

The secret has 256 bits of entropy, so a plain sha256 (not a slow password hash) is the
right tool: nothing to brute-force, and verifying costs microseconds on every request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.auth.principal import DEFAULT_TENANT, CredentialKind, Principal, Scope
from agentstream.db.models_auth import ApiKey

PREFIX = "agsk"
_SCOPES = frozenset(s.value for s in Scope)
KEY_PATTERN = re.compile(r"^agsk_([a-f0-9]{12})_([A-Za-z0-9_-]{43})$")


def _now() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime | None) -> datetime | None:
    # SQLite hands timestamps back without their zone; every stored timestamp is UTC.
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def parse_key(token: str) -> tuple[str, str] | None:
    """(key id, secret) of a well-formed key, else None."""
    match = KEY_PATTERN.match(token)
    return (match.group(1), match.group(2)) if match else None


@dataclass(frozen=True)
class NewKey:
    """What `create` returns: the only time the whole key is known."""

    key_id: str
    token: str
    principal: Principal


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    name: str
    principal: Principal
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > _now())


def _principal(row: ApiKey) -> Principal:
    return Principal(
        subject=row.key_id,
        kind=CredentialKind.API_KEY,
        tenant_id=row.tenant_id,
        name=row.name,
        scopes=frozenset(Scope(s) for s in row.scopes if s in _SCOPES),
        platform=row.platform,
        user_id=row.user_id,
        gateway_platforms=tuple(row.gateway_platforms),
        profiles=tuple(row.profiles),
    )


class KeyStore:
    """API keys in the database."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def create(
        self,
        name: str,
        scopes: set[Scope],
        *,
        tenant_id: str = DEFAULT_TENANT,
        platform: str | None = None,
        user_id: str | None = None,
        gateway_platforms: tuple[str, ...] = (),
        profiles: tuple[str, ...] = (),
        expires_at: datetime | None = None,
    ) -> NewKey:
        if (platform is None) != (user_id is None):
            raise ValueError("a key pins both platform and user, or neither")
        key_id = os.urandom(6).hex()
        secret = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        row = ApiKey(
            key_id=key_id,
            secret_hash=hash_secret(secret),
            name=name,
            tenant_id=tenant_id,
            scopes=sorted(s.value for s in scopes),
            platform=platform,
            user_id=user_id,
            gateway_platforms=list(gateway_platforms),
            profiles=list(profiles),
            created_at=_now(),
            expires_at=expires_at,
            revoked_at=None,
        )
        async with self.sessions() as session, session.begin():
            session.add(row)
        return NewKey(key_id, f"{PREFIX}_{key_id}_{secret}", _principal(row))

    async def verify(self, token: str) -> Principal | None:
        """The key's principal when the token is a live key, else None."""
        parsed = parse_key(token)
        if parsed is None:
            return None
        key_id, secret = parsed
        async with self.sessions() as session:
            row = await session.get(ApiKey, key_id)
        if row is None or not hmac.compare_digest(row.secret_hash, hash_secret(secret)):
            return None
        expires = _as_utc(row.expires_at)
        if row.revoked_at is not None or (expires is not None and expires <= _now()):
            return None
        return _principal(row)

    async def list(self, include_revoked: bool = False) -> list[KeyInfo]:
        query = select(ApiKey).order_by(ApiKey.created_at, ApiKey.key_id)
        if not include_revoked:
            query = query.where(ApiKey.revoked_at.is_(None))
        async with self.sessions() as session:
            rows = (await session.scalars(query)).all()
        return [
            KeyInfo(
                r.key_id,
                r.name,
                _principal(r),
                _as_utc(r.created_at) or _now(),
                _as_utc(r.expires_at),
                _as_utc(r.revoked_at),
            )
            for r in rows
        ]

    async def revoke(self, key_id: str) -> bool:
        """True when a live key was revoked."""
        async with self.sessions() as session, session.begin():
            result = await session.execute(
                update(ApiKey).where(ApiKey.key_id == key_id, ApiKey.revoked_at.is_(None)).values(revoked_at=_now())
            )
        return bool(getattr(result, "rowcount", 0))
