"""Self-echo and authorization (docs/ingress.md) as pure functions: self-echo, and who may start runs.

Self-echo (the origin marker): a message is ours when `metadata.origin == "agentstream"`
(what our own adapters and relays stamp on what they post) or when its author is one of
the platform's `authz.bot_user_ids`.
"""

from __future__ import annotations

from enum import StrEnum

from agentstream.config.ingress import AuthzRule, AuthzSettings
from agentstream.contracts import InboundMessage

ORIGIN_MARKER = "agentstream"
DIRECT_CHAT_TYPES = frozenset({"direct", "private", "dm", "im"})


class Verdict(StrEnum):
    ALLOWED = "allowed"
    DENIED = "denied"  # denylisted, or an allowlist exists and the user is not on it
    UNKNOWN = "unknown"  # no allowlist at all: only a paired user gets through


def is_self_echo(msg: InboundMessage, authz: AuthzSettings) -> bool:
    if msg.metadata.get("origin") == ORIGIN_MARKER:
        return True
    return msg.user.id in authz.bot_user_ids.get(msg.platform, ())


def is_direct_chat(msg: InboundMessage) -> bool:
    """A one-to-one chat: said so by the adapter (`metadata.chat_type`), or the chat is the user."""
    chat_type = msg.metadata.get("chat_type")
    if isinstance(chat_type, str):
        return chat_type.lower() in DIRECT_CHAT_TYPES
    return msg.chat_id == msg.user.id


def authorize(
    msg: InboundMessage, platform_rule: AuthzRule, profile_rule: AuthzRule | None, deny_only: AuthzRule | None = None
) -> Verdict:
    """`deny_only`: a rule whose deny lists apply but whose allows do not (a profile the message bypassed)."""
    rules = [platform_rule] + ([profile_rule] if profile_rule is not None else [])
    user, team = msg.user.id, msg.user.team_id
    for rule in rules + ([deny_only] if deny_only is not None else []):
        if user in rule.deny_users or (team is not None and team in rule.deny_teams):
            return Verdict.DENIED
    if any(rule.allow_all for rule in rules):
        return Verdict.ALLOWED
    listed = [rule for rule in rules if rule.users or rule.teams]
    if not listed:
        return Verdict.UNKNOWN
    for rule in listed:
        if user in rule.users or (team is not None and team in rule.teams):
            return Verdict.ALLOWED
    return Verdict.DENIED
