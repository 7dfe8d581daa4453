"""Conversation identity: the key of every run-scoped record, and the tenant inside it.

A conversation is (tenant, platform, chat, thread). Chat and user ids are the platform's or a
gateway's, so two tenants may well use the same ones: the tenant is part of the key, or their
histories, approvals and streams would meet. The default tenant's keys carry no tenant, so a
single-tenant deployment keeps the keys it always had (docs/decisions.md § Tenants in the key):

    platform:chat_id[:thread_id]            the default tenant (or none)
    tenant/platform:chat_id[:thread_id]     any other tenant
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TENANT = "default"
TENANT_SEPARATOR = "/"


def tenant_scoped(tenant_id: str | None, value: str) -> str:
    """`value` inside `tenant_id`'s namespace: unchanged for the default tenant, else `tenant/value`."""
    if tenant_id is None or tenant_id == DEFAULT_TENANT:
        return value
    return f"{tenant_id}{TENANT_SEPARATOR}{value}"


def conversation_key(platform: str, chat_id: str, thread_id: str | None = None, *, tenant_id: str | None = None) -> str:
    """The Kafka key of every run-scoped record of one conversation."""
    key = f"{platform}:{chat_id}"
    return tenant_scoped(tenant_id, f"{key}:{thread_id}" if thread_id else key)


@dataclass(frozen=True)
class ConversationParts:
    tenant_id: str
    platform: str
    chat_id: str
    thread_id: str | None


def split_conversation_key(key: str) -> ConversationParts:
    """A key's parts, for the few places that have nothing but the key (a run without its target).

    Best effort, as the key is not escaped: a `/` before the first `:` ends the tenant, and the chat
    id ends at the next `:`."""
    tenant, platform_chat = DEFAULT_TENANT, key
    head, colon, _ = key.partition(":")
    if colon and TENANT_SEPARATOR in head:
        tenant, _, platform_chat = key.partition(TENANT_SEPARATOR)
    platform, _, rest = platform_chat.partition(":")
    chat, _, thread = rest.partition(":")
    return ConversationParts(tenant, platform, chat, thread or None)
