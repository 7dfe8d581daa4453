"""routing: the most specific route picks the profile; naming a profile keeps the routed one's deny lists."""

import pytest

from agentstream.config import load_settings
from agentstream.contracts import InboundMessage
from agentstream_ingress.authz import Verdict, authorize
from agentstream_ingress.routing import route


def msg(**over) -> InboundMessage:  # type: ignore[no-untyped-def]
    body = {"id": "m", "platform": "slack", "chat_id": "C1", "user": {"id": "u", "team_id": "T1"}, "text": "x"}
    body.update(over)
    return InboundMessage.model_validate(body)


ROUTES = [
    {"platform": "slack", "profile": "platform"},
    {"platform": "slack", "team": "T1", "profile": "team"},
    {"chat": "C1", "profile": "chat"},
    {"chat": "C1", "thread": "th", "profile": "thread"},
    {"bot": "b2", "profile": "bot"},
]
PROFILES = {name: {"assistant": f"a-{name}"} for name in ("platform", "team", "chat", "thread", "bot", "default")}


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"thread_id": "th"}, "thread"),
        ({}, "chat"),
        ({"chat_id": "C2"}, "team"),
        ({"chat_id": "C2", "user": {"id": "u"}}, "platform"),
        ({"platform": "telegram", "chat_id": "9"}, "default"),
        ({"platform": "telegram", "chat_id": "9", "metadata": {"bot": "b2"}}, "bot"),
        ({"profile": "bot"}, "bot"),  # an explicit profile skips routing
    ],
)
def test_most_specific_route_wins(over, expected):
    settings = load_settings(routes=ROUTES, profiles=PROFILES)
    routed = route(msg(**over), settings)
    assert routed.name == expected and routed.profile.assistant == f"a-{expected}"


def test_no_default_profile_configured_gives_an_empty_one():
    routed = route(msg(), load_settings())
    assert routed.name == "default" and routed.profile.assistant is None


def test_naming_another_profile_keeps_the_routed_profiles_deny_list():
    profiles = {"default": {"authz": {"deny_users": ["mallory"]}}, "open": {"authz": {"allow_all": True}}}
    settings = load_settings(profiles=profiles, authz={"default": {"allow_all": False}})
    named = msg(user={"id": "mallory"}, profile="open")
    routed = route(named, settings)
    assert routed.name == "open" and routed.bypassed is not None
    verdict = authorize(named, settings.authz.rule_for(named.platform), routed.profile.authz, routed.bypassed.authz)
    assert verdict is Verdict.DENIED
    # the bypassed profile's allows do not count; the named profile's do
    alice = msg(user={"id": "alice"}, profile="open")
    r = route(alice, settings)
    assert (
        authorize(
            alice, settings.authz.rule_for(alice.platform), r.profile.authz, r.bypassed.authz if r.bypassed else None
        )
        is Verdict.ALLOWED
    )
    # without the bypassed rule (the old behaviour) mallory would have passed: the test guards the fix
    assert authorize(named, settings.authz.rule_for(named.platform), routed.profile.authz) is Verdict.ALLOWED
