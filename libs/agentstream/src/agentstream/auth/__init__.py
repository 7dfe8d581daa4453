"""Authentication and authorization of the HTTP surfaces: credentials → principals with scopes."""

from agentstream.auth.authenticator import ADMIN_PRINCIPAL, Authenticator, bearer_token
from agentstream.auth.http import AUTH_RESPONSES, authenticate, requires
from agentstream.auth.keys import KeyStore, NewKey
from agentstream.auth.principal import ALL_TENANTS, DEFAULT_TENANT, CredentialKind, Principal, Scope
from agentstream.auth.web_sessions import WEB_AUDIENCE, WebSession, WebSessions

__all__ = [
    "ADMIN_PRINCIPAL",
    "ALL_TENANTS",
    "AUTH_RESPONSES",
    "DEFAULT_TENANT",
    "Authenticator",
    "CredentialKind",
    "KeyStore",
    "NewKey",
    "Principal",
    "Scope",
    "WEB_AUDIENCE",
    "WebSession",
    "WebSessions",
    "authenticate",
    "bearer_token",
    "requires",
]
