"""JWTs from an identity provider (RS256/ES256 through its JWKS) or signed with a shared HS256 secret."""

from __future__ import annotations

import asyncio
from typing import Any

import jwt

from agentstream.auth.principal import ALL_TENANTS, DEFAULT_TENANT, CredentialKind, Principal, Scope
from agentstream.config.auth import JwtSettings

_SCOPES = frozenset(s.value for s in Scope)
ASYMMETRIC = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"]


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


class JwtVerifier:
    def __init__(self, cfg: JwtSettings) -> None:
        self.cfg = cfg
        # PyJWKClient caches the key set and refetches on an unknown `kid`; it is blocking, so it runs
        # in a worker thread (only on a cache miss does it touch the network).
        self._jwks = jwt.PyJWKClient(cfg.jwks_url, cache_keys=True, lifespan=300) if cfg.jwks_url else None

    async def verify(self, token: str) -> Principal | None:
        try:
            header = jwt.get_unverified_header(token)
            alg = header.get("alg")
            if alg == "HS256" and (secret := self.cfg.hs256_secret()):
                key: Any = secret
                algorithms = ["HS256"]
            elif alg in ASYMMETRIC and self._jwks is not None:
                key = (await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)).key
                algorithms = ASYMMETRIC
            else:
                return None  # `none`, or an algorithm nobody configured
            claims = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                audience=self.cfg.audience,
                issuer=self.cfg.issuer,
                leeway=self.cfg.leeway_s,
                options={"require": ["exp", "sub"], "verify_aud": self.cfg.audience is not None},
            )
        except (jwt.PyJWTError, ValueError):
            return None
        return self.principal(claims)

    def principal(self, claims: dict[str, Any]) -> Principal | None:
        raw = claims.get(self.cfg.scopes_claim, "")
        names = raw.split() if isinstance(raw, str) else [str(s) for s in raw] if isinstance(raw, list) else []
        user = claims.get(self.cfg.user_claim)
        tenant = claims.get(self.cfg.tenant_claim) or DEFAULT_TENANT
        platform = claims.get(self.cfg.platform_claim)
        if not isinstance(user, str | int) or not isinstance(tenant, str):
            return None
        scopes = frozenset(Scope(n) for n in names if n in _SCOPES)
        if tenant == ALL_TENANTS and Scope.ADMIN not in scopes:
            # Every tenant is an operator's reach: an identity provider grants it only with `admin`.
            return None
        # An identity provider's token speaks for one end user: on its own platform, else the `api` platform.
        return Principal(
            subject=f"jwt:{claims['sub']}",
            kind=CredentialKind.JWT,
            tenant_id=tenant,
            scopes=scopes,
            platform=platform if isinstance(platform, str) else "api",
            user_id=str(user),
        )
