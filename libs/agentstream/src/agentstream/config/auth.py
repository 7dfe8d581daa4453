"""The `auth` section: who may call the HTTP endpoints, and how they prove it.

Credentials are API keys (stored hashed, made with `agentstream keys create`) or JWTs from an
identity provider. Secrets are never values here: the file names the environment variables
that hold them (`*_env`).
"""

from __future__ import annotations

import os

from pydantic import Field, model_validator

from agentstream.config.core import Section


def _env(name: str | None) -> str | None:
    return (os.environ.get(name) or None) if name else None


class JwtSettings(Section):
    """JWTs signed with a shared HS256 secret or by an identity provider's keys (RS256, JWKS)."""

    hs256_secret_env: str | None = Field(default=None, description="Env var holding the HS256 signing secret.")
    jwks_url: str | None = Field(default=None, description="JWKS URL of the identity provider (RS256/ES256).")
    issuer: str | None = Field(default=None, description="Required `iss`, when set.")
    audience: str | None = Field(default=None, description="Required `aud`, when set.")
    tenant_claim: str = Field(default="tenant", description="Claim holding the tenant id (else `default`).")
    user_claim: str = Field(default="sub", description="Claim holding the end user's id.")
    platform_claim: str = Field(default="platform", description="Claim fixing the user's platform (optional).")
    scopes_claim: str = Field(default="scope", description="Claim with the scopes: space-separated or a list.")
    leeway_s: float = Field(default=30.0, ge=0, description="Clock skew tolerated on `exp`/`nbf`.")

    @property
    def enabled(self) -> bool:
        return bool(self.hs256_secret_env or self.jwks_url)

    def hs256_secret(self) -> str | None:
        return _env(self.hs256_secret_env)


class WebSessionSettings(Section):
    """Per-chat session tokens of the web chat page (signed, expiring)."""

    secret_env: str | None = Field(
        default=None,
        description="Env var holding the signing secret. Without it a random secret is made per process "
        "(the embedded stack stores one in .agentstream/); set it when delivery has several replicas.",
    )
    ttl_s: float = Field(default=24 * 3600.0, gt=0, description="How long a session token is valid.")

    def secret(self) -> str | None:
        return _env(self.secret_env)


class AuthSettings(Section):
    """The `auth` section: API keys (in the database), JWTs (`jwt`), the web chat's session tokens
    (`web`), and two fixed tokens: a bootstrap admin credential and the scrape token of `/metrics`."""

    admin_token_env: str | None = Field(
        default=None,
        description="Env var holding a bootstrap credential with the `admin` scope for all tenants "
        "(for operators and tests; prefer `agentstream keys create`).",
    )
    metrics_token_env: str | None = Field(
        default=None,
        description="Env var holding the scrape token accepted on `/metrics` (besides keys with "
        "`metrics:read` or `admin`).",
    )
    key_cache_s: float = Field(
        default=5.0,
        ge=0,
        description="How long a verified API key is trusted before the database is asked again "
        "(a revoked key stops working within this time).",
    )
    jwt: JwtSettings = Field(default_factory=JwtSettings)
    web: WebSessionSettings = Field(default_factory=WebSessionSettings)

    def admin_token(self) -> str | None:
        return _env(self.admin_token_env)

    def metrics_token(self) -> str | None:
        return _env(self.metrics_token_env)

    @model_validator(mode="after")
    def _jwt_issuer_with_jwks(self) -> AuthSettings:
        if self.jwt.jwks_url and not self.jwt.jwks_url.startswith(("https://", "http://127.", "http://localhost")):
            raise ValueError("auth.jwt.jwks_url must be https:// (or a loopback http URL)")
        return self
