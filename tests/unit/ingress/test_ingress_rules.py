"""Pure rules: authorization, routing specificity, token bucket, self-echo."""

import pytest

from agentstream.config import load_settings
from agentstream.config.ingress import AuthzRule, AuthzSettings, RateLimitSettings
from agentstream.contracts import InboundMessage
from agentstream_ingress.authz import Verdict, authorize, is_direct_chat, is_self_echo
from agentstream_ingress.ratelimit import RateLimiter
from agentstream_ingress.routing import route


def msg(**over) -> InboundMessage:  # type: ignore[no-untyped-def]
    body = {"id": "m", "platform": "slack", "chat_id": "C1", "user": {"id": "u", "team_id": "T1"}, "text": "x"}
    body.update(over)
    return InboundMessage.model_validate(body)


@pytest.mark.parametrize(
    ("rule", "profile", "verdict"),
    [
        (AuthzRule(allow_all=True), None, Verdict.ALLOWED),
        (AuthzRule(allow_all=True, deny_users=["u"]), None, Verdict.DENIED),
        (AuthzRule(allow_all=True), AuthzRule(deny_teams=["T1"]), Verdict.DENIED),
        (AuthzRule(users=["u"]), None, Verdict.ALLOWED),
        (AuthzRule(teams=["T1"]), None, Verdict.ALLOWED),
        (AuthzRule(users=["someone"]), None, Verdict.DENIED),
        (AuthzRule(), AuthzRule(users=["u"]), Verdict.ALLOWED),
        (AuthzRule(), None, Verdict.UNKNOWN),
    ],
)
def test_authorize(rule, profile, verdict):
    assert authorize(msg(), rule, profile) is verdict


def test_direct_chat_and_self_echo():
    assert is_direct_chat(msg(metadata={"chat_type": "im"}))
    assert is_direct_chat(msg(chat_id="u"))
    assert not is_direct_chat(msg(chat_id="u", metadata={"chat_type": "group"}))
    authz = AuthzSettings(bot_user_ids={"slack": ["B1"]})
    assert is_self_echo(msg(metadata={"origin": "agentstream"}), authz)
    assert is_self_echo(msg(user={"id": "B1"}), authz)
    assert not is_self_echo(msg(user={"id": "B1"}, platform="telegram"), authz)
    assert not is_self_echo(msg(), authz)


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


def test_token_bucket_refills_over_time():
    now = [0.0]
    limiter = RateLimiter(RateLimitSettings(capacity=2, refill_per_s=1.0), clock=lambda: now[0])
    assert [limiter.allow("p", "u") for _ in range(3)] == [True, True, False]
    assert limiter.allow("p", "other")
    now[0] = 0.5
    assert not limiter.allow("p", "u")
    now[0] = 1.6
    assert limiter.allow("p", "u") and not limiter.allow("p", "u")
    assert RateLimiter(RateLimitSettings(enabled=False, capacity=1)).allow("p", "u")


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
