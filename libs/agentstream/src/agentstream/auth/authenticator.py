"""One place that turns a presented credential into a `Principal`, whatever its kind."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agentstream.auth.jwt_tokens import JwtVerifier, looks_like_jwt
from agentstream.auth.keys import KeyStore, parse_key
from agentstream.auth.principal import ALL_TENANTS, CredentialKind, Principal, Scope
from agentstream.config.auth import AuthSettings
from agentstream.db import create_engine, session_factory

CACHE_SIZE = 10_000


def _env_token_principal(subject: str, kind: CredentialKind, scope: Scope, name: str) -> Principal:
    """Who presents a token set in the environment: every tenant, the one scope the token is for."""
    return Principal(subject=subject, kind=kind, tenant_id=ALL_TENANTS, scopes=frozenset({scope}), name=name)


ADMIN_PRINCIPAL = _env_token_principal("admin-token", CredentialKind.ADMIN_TOKEN, Scope.ADMIN, "bootstrap admin token")
METRICS_PRINCIPAL = _env_token_principal(
    "metrics-token", CredentialKind.METRICS_TOKEN, Scope.METRICS_READ, "scrape token"
)


def bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _same(a: str, b: str | None) -> bool:
    return b is not None and hmac.compare_digest(a.encode(), b.encode())


class Authenticator:
    """Verifies bearer tokens: the bootstrap admin token, the scrape token, API keys, JWTs.

    Verified API keys are remembered for `auth.key_cache_s` (keyed by the token's hash, bounded),
    so a busy front door asks the database once per key every few seconds, not once per request.
    """

    def __init__(
        self, cfg: AuthSettings, database_url: str, sessions: async_sessionmaker[AsyncSession] | None = None
    ) -> None:
        self.cfg = cfg
        self.database_url = database_url
        self._sessions = sessions
        self._engine: AsyncEngine | None = None
        self._keys: KeyStore | None = None
        self._jwt = JwtVerifier(cfg.jwt) if cfg.jwt.enabled else None
        self._cache: OrderedDict[bytes, tuple[Principal, float]] = OrderedDict()

    def use_sessions(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        """Share the service's database sessions instead of opening an engine of its own."""
        self._sessions, self._keys = sessions, None

    def keys(self) -> KeyStore:
        if self._keys is None:
            if self._sessions is None:
                self._engine = create_engine(self.database_url)
                self._sessions = session_factory(self._engine)
            self._keys = KeyStore(self._sessions)
        return self._keys

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine, self._sessions, self._keys = None, None, None

    def forget(self) -> None:
        """Drop every remembered key (after a revocation in this process)."""
        self._cache.clear()

    async def authenticate(self, token: str | None) -> Principal | None:
        if not token:
            return None
        if _same(token, self.cfg.admin_token()):
            return ADMIN_PRINCIPAL
        if _same(token, self.cfg.metrics_token()):
            return METRICS_PRINCIPAL
        if parse_key(token) is not None:
            return await self._api_key(token)
        if self._jwt is not None and looks_like_jwt(token):
            return await self._jwt.verify(token)
        return None

    async def _api_key(self, token: str) -> Principal | None:
        digest = hashlib.sha256(token.encode()).digest()
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[1] > now:
            return hit[0]
        principal = await self.keys().verify(token)
        if principal is None:
            self._cache.pop(digest, None)
            return None
        if self.cfg.key_cache_s > 0:
            self._cache[digest] = (principal, now + self.cfg.key_cache_s)
            self._cache.move_to_end(digest)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return principal
