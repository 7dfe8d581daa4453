"""Session tokens of the web chat page: one chat, one end user, signed (HS256) and expiring.

A token is a JWT with its own audience, so it is never mistaken for another credential: it
carries no `sub` (which `auth.jwt` requires) and every other verifier checks its own audience.
Whoever holds it may read and post in its chat only, as its user.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime
from typing import Any

import jwt
from pydantic import BaseModel, ConfigDict

from agentstream.config.auth import WebSessionSettings

WEB_AUDIENCE = "agentstream-web"
ALGORITHM = "HS256"
MIN_SECRET_BYTES = 32  # HS256 keys shorter than its hash are guessable offline from one token


class WebSession(BaseModel):
    """What a valid token proves."""

    model_config = ConfigDict(frozen=True)

    chat_id: str
    user_id: str
    tenant_id: str
    name: str | None = None
    expires_at: datetime


class WebSessions:
    """Issues and verifies web chat session tokens with `auth.web.secret_env` (else a per-process secret)."""

    def __init__(self, cfg: WebSessionSettings, secret: str | None = None) -> None:
        self.cfg = cfg
        configured = secret if secret is not None else cfg.secret()
        if configured is not None and len(configured.encode()) < MIN_SECRET_BYTES:
            raise ValueError(
                f"the web session secret (env var {cfg.secret_env!r}) must be at least {MIN_SECRET_BYTES} bytes"
            )
        # Without a configured secret every process signs with its own: tokens end with it.
        self.ephemeral = configured is None
        self._secret = configured or secrets.token_urlsafe(MIN_SECRET_BYTES)

    def issue(
        self,
        chat_id: str,
        user_id: str,
        tenant_id: str,
        name: str | None = None,
        *,
        now: float | None = None,
    ) -> tuple[str, WebSession]:
        issued = time.time() if now is None else now
        expires = int(issued + self.cfg.ttl_s)
        claims: dict[str, Any] = {
            "aud": WEB_AUDIENCE,
            "chat": chat_id,
            "uid": user_id,
            "tenant": tenant_id,
            "iat": int(issued),
            "exp": expires,
        }
        if name:
            claims["name"] = name
        token = jwt.encode(claims, self._secret, algorithm=ALGORITHM)
        session = WebSession(
            chat_id=chat_id,
            user_id=user_id,
            tenant_id=tenant_id,
            name=name,
            expires_at=datetime.fromtimestamp(expires, UTC),
        )
        return token, session

    def verify(self, token: str | None) -> WebSession | None:
        """The session of a valid, unexpired token; None for anything else."""
        if not token:
            return None
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                audience=WEB_AUDIENCE,
                options={"require": ["aud", "exp", "chat", "uid", "tenant"]},
            )
        except jwt.PyJWTError:
            return None
        chat, uid, tenant, name = claims["chat"], claims["uid"], claims["tenant"], claims.get("name")
        if not all(isinstance(v, str) and v for v in (chat, uid, tenant)) or not isinstance(name, str | None):
            return None
        return WebSession(
            chat_id=chat,
            user_id=uid,
            tenant_id=tenant,
            name=name,
            expires_at=datetime.fromtimestamp(claims["exp"], UTC),
        )
