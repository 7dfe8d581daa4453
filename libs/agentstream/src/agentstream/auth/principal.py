"""Who is calling: the principal a credential stands for, and what it may do."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agentstream.contracts.keys import DEFAULT_TENANT as DEFAULT_TENANT  # one value, shared with the keys

ALL_TENANTS = "*"


class Scope(StrEnum):
    """What a credential may do. `admin` implies every other scope."""

    MESSAGES_WRITE = "messages:write"  # post messages as the credential's own identity
    CONVERSATIONS_READ = "conversations:read"  # read runs and messages of its tenant
    RUNS_RESUME = "runs:resume"  # read a run's resume checkpoint
    GATEWAY = "gateway"  # post messages asserting end users' identities (internal adapters)
    METRICS_READ = "metrics:read"  # scrape /metrics
    ADMIN = "admin"  # everything above, operator endpoints, the OpenAPI documents


class CredentialKind(StrEnum):
    API_KEY = "api_key"
    JWT = "jwt"
    ADMIN_TOKEN = "admin_token"
    METRICS_TOKEN = "metrics_token"
    WEB_SESSION = "web_session"


class Principal(BaseModel):
    """The identity a credential proves. Everything a request may claim about who sent it comes from here.

    `tenant_id` is `*` only for operators' credentials (every tenant). `platform`/`user_id` pin the end
    user a credential speaks for (a personal key, a JWT's subject); without them the principal posts as
    itself (`api` platform user `key:<id>`). A `gateway` principal may assert end users' identities, but
    only on `gateway_platforms`.
    """

    model_config = ConfigDict(frozen=True)

    subject: str = Field(description="Stable id of the credential: the key id, the JWT subject, …")
    kind: CredentialKind
    tenant_id: str = DEFAULT_TENANT
    scopes: frozenset[Scope] = frozenset()
    platform: str | None = None
    user_id: str | None = None
    gateway_platforms: tuple[str, ...] = ()
    profiles: tuple[str, ...] = Field(default=(), description="Profiles it may choose; empty: routes decide.")
    name: str | None = None

    def has(self, scope: Scope) -> bool:
        return scope in self.scopes or Scope.ADMIN in self.scopes

    @property
    def all_tenants(self) -> bool:
        return self.tenant_id == ALL_TENANTS

    def sees_tenant(self, tenant_id: str | None) -> bool:
        """Rows without a tenant belong to the default tenant."""
        return self.all_tenants or (tenant_id or DEFAULT_TENANT) == self.tenant_id

    def may_assert(self, platform: str) -> bool:
        """May this principal speak for any user of `platform`?"""
        return self.has(Scope.GATEWAY) and (Scope.ADMIN in self.scopes or platform in self.gateway_platforms)
