"""Routing (docs/ingress.md): pick the profile of a message. The most specific matching route wins:
thread beats chat beats team beats bot beats platform; ties go to the earlier route."""

from __future__ import annotations

from dataclasses import dataclass

from agentstream.config import Settings
from agentstream.config.ingress import ProfileSettings, RouteSettings
from agentstream.contracts import InboundMessage

DEFAULT_PROFILE = "default"
# One field outweighs every less specific field together, so "thread" beats "chat + team + bot + platform".
WEIGHTS = {"thread": 16, "chat": 8, "team": 4, "bot": 2, "platform": 1}
NO_PROFILE = ProfileSettings()  # what an unconfigured default profile means (read only)
BOT_METADATA = "bot"  # the receiving bot, as its webhook or gateway says
ROUTING_METADATA = frozenset({BOT_METADATA})  # the metadata keys routes read (route_authz.py checks who set them)


@dataclass(frozen=True)
class Routed:
    name: str
    profile: ProfileSettings
    # When the message names its profile: the one the routes would have chosen. Its deny lists still
    # apply, so naming another profile never escapes a deny list.
    bypassed: ProfileSettings | None = None


def _values(msg: InboundMessage) -> dict[str, str | None]:
    bot = msg.metadata.get(BOT_METADATA)
    return {
        "platform": msg.platform,
        "team": msg.user.team_id,
        "chat": msg.chat_id,
        "thread": msg.thread_id,
        "bot": bot if isinstance(bot, str) else None,
    }


def specificity(route: RouteSettings, msg: InboundMessage) -> int | None:
    """The route's weight when it matches `msg`, else None."""
    values, score = _values(msg), 0
    for field, weight in WEIGHTS.items():
        wanted = getattr(route, field)
        if wanted is None:
            continue
        if values[field] != wanted:
            return None
        score += weight
    return score


def route(msg: InboundMessage, settings: Settings) -> Routed:
    routed = by_routes(msg, settings)
    if msg.profile and msg.profile in settings.profiles and msg.profile != routed.name:
        return Routed(msg.profile, settings.profiles[msg.profile], bypassed=routed.profile)
    return routed


def by_routes(msg: InboundMessage, settings: Settings) -> Routed:
    best: tuple[int, RouteSettings] | None = None
    for candidate in settings.routes:
        score = specificity(candidate, msg)
        if score is not None and (best is None or score > best[0]):
            best = (score, candidate)
    if best is not None and best[1].profile in settings.profiles:
        return Routed(best[1].profile, settings.profiles[best[1].profile])
    return Routed(DEFAULT_PROFILE, settings.profiles.get(DEFAULT_PROFILE, NO_PROFILE))
