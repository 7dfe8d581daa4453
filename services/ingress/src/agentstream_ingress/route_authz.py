"""May this credential use the profile and assistant a posted message would run with?

Routing reads the message (`metadata.bot` included), and the caller writes the message: checking only
the profile it *names* would let `metadata: {"bot": "premium"}` reach a route the credential may not
name. So the profile routing *resolves* is authorized, and an assistant named in the body must be one of
a usable profile's (docs/security.md § Identity comes from the credential).

A credential may use:

- every profile and assistant, with `admin`;
- the profiles it lists (`keys create --profile`);
- the profile the routes give its own identity. What counts as identity: the platform, chat, thread and
  team of the message, and — only when a gateway asserts the message (its platform) — `metadata.bot`,
  which the gateway knows as it knows the chat. Any other caller's `metadata.bot` is its own wish.
"""

from __future__ import annotations

from agentstream.auth import Principal, Scope
from agentstream.config import Settings
from agentstream.contracts import InboundMessage
from agentstream_ingress.identity import Refused
from agentstream_ingress.routing import ROUTING_METADATA, by_routes, route


def authorize_route(msg: InboundMessage, principal: Principal, settings: Settings) -> Refused | None:
    """None when the credential may use what `msg` would run with, else why not."""
    if principal.has(Scope.ADMIN):
        return None
    own = msg if principal.may_assert(msg.platform) else _without_routing_metadata(msg)
    usable = {*principal.profiles, by_routes(own, settings).name}
    routed = route(msg, settings)
    if routed.name not in usable:
        return Refused(f"this credential may not use profile {routed.name!r}, where this message would be routed")
    if msg.assistant_id is not None:
        assistants = {
            settings.profiles[p].assistant or settings.default_assistant
            if p in settings.profiles
            # an unconfigured profile (the default) runs the default assistant
            else settings.default_assistant
            for p in usable
        }
        if msg.assistant_id not in assistants:
            return Refused(f"this credential may not choose assistant {msg.assistant_id!r}")
    return None


def _without_routing_metadata(msg: InboundMessage) -> InboundMessage:
    metadata = {k: v for k, v in msg.metadata.items() if k not in ROUTING_METADATA}
    return msg.model_copy(update={"metadata": metadata})
