"""Who a web chat session is for: the credential that asks for it decides (the rules of ingress's identity).

- A *gateway* principal for platform `web` (or `admin`) stands for the site that embeds the chat:
  it names the chat and the end user. Its tenant is its own (an all-tenants credential names one,
  else `default`).
- Any other principal with `messages:write` gets a session for itself only: its own user id
  (a pinned `web`/`api` user, else `key.<key id>`) in its own direct chat (chat id = user id).
  A credential pinned to another platform's user gets none: that user is not a web user.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentstream.auth import DEFAULT_TENANT, Principal, Scope
from agentstream.contracts import KnownPlatform
from agentstream.contracts.inbound import ChatId, Identifier

WEB_PLATFORM = KnownPlatform.WEB
SELF_PLATFORMS = frozenset({"api", WEB_PLATFORM})  # pinned platforms whose users may chat on the page
CHAT_ID: TypeAdapter[str] = TypeAdapter(ChatId)


class SessionRequest(BaseModel):
    """Body of `POST /v1/web/sessions`."""

    model_config = ConfigDict(extra="forbid")

    chat_id: ChatId | None = Field(
        default=None,
        description="Gateway credentials; default: the user id. Others: their own only.",
    )
    user_id: Identifier | None = Field(
        default=None, description="Gateway credentials: required. Others: their own only."
    )
    user_name: str | None = Field(default=None, min_length=1, max_length=256, description="Display name.")
    tenant_id: Identifier | None = Field(default=None, description="All-tenants credentials only; others: their own.")


@dataclass(frozen=True)
class SessionIdentity:
    chat_id: str
    user_id: str
    tenant_id: str
    name: str | None


def session_identity(req: SessionRequest, principal: Principal) -> SessionIdentity:
    """Who the session is for; a credential that may not open it is refused (`HTTPException`, 403 or 422)."""
    who = _identity(req, principal)
    try:
        CHAT_ID.validate_python(who.chat_id)
    except ValidationError:
        raise HTTPException(422, "the user id cannot be a chat id (too long): name chat_id") from None
    return who


def _identity(req: SessionRequest, principal: Principal) -> SessionIdentity:
    if req.tenant_id is not None and not principal.all_tenants and req.tenant_id != principal.tenant_id:
        raise HTTPException(403, f"this credential belongs to tenant {principal.tenant_id!r}")
    tenant = (req.tenant_id or DEFAULT_TENANT) if principal.all_tenants else principal.tenant_id
    if principal.may_assert(WEB_PLATFORM):
        if req.user_id is None:
            raise HTTPException(422, "a gateway credential names the session's user_id")
        return SessionIdentity(req.chat_id or req.user_id, req.user_id, tenant, req.user_name)
    if not principal.has(Scope.MESSAGES_WRITE):
        raise HTTPException(
            403, f"this credential lacks the {Scope.MESSAGES_WRITE.value!r} scope (or {Scope.GATEWAY.value!r} for web)"
        )
    if principal.platform is not None and principal.platform not in SELF_PLATFORMS:
        raise HTTPException(403, f"this credential speaks for a {principal.platform} user, not a web user")
    user_id = principal.user_id or f"key.{principal.subject}"
    if req.user_id not in (None, user_id):
        raise HTTPException(403, f"this credential speaks for user {user_id!r} only")
    if req.chat_id not in (None, user_id):
        raise HTTPException(403, f"this credential may open only its own direct chat {user_id!r}")
    return SessionIdentity(user_id, user_id, tenant, req.user_name or principal.name)
