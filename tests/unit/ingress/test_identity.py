"""Who a posted message is from: the credential decides; a body that claims otherwise is refused."""

from __future__ import annotations

import pytest

from agentstream.auth import ALL_TENANTS, CredentialKind, Principal, Scope
from agentstream.contracts import InboundMessage
from agentstream_ingress.identity import PostedMessage, Refused, bind_identity, source_of


def key(*scopes: Scope, **over: object) -> Principal:
    fields: dict[str, object] = {
        "subject": "k1",
        "kind": CredentialKind.API_KEY,
        "tenant_id": "acme",
        "scopes": frozenset(scopes),
        **over,
    }
    return Principal.model_validate(fields)


def post(**body: object) -> PostedMessage:
    return PostedMessage.model_validate({"id": "m1", "text": "hi", **body})


def bound(body: PostedMessage, who: Principal) -> InboundMessage:
    result = bind_identity(body, who)
    assert isinstance(result, InboundMessage), result
    return result


def test_a_plain_key_posts_as_itself_on_the_api_platform():
    msg = bound(post(thread_id="t1"), key(Scope.MESSAGES_WRITE))
    assert (msg.platform, msg.chat_id, msg.thread_id, msg.user.id, msg.user.tenant_id) == (
        "api",
        "key.k1",
        "t1",
        "key.k1",
        "acme",
    )


def test_a_pinned_key_posts_as_its_user():
    who = key(Scope.MESSAGES_WRITE, platform="telegram", user_id="42")
    msg = bound(post(), who)
    assert (msg.platform, msg.chat_id, msg.user.id) == ("telegram", "42", "42")
    # restating its own identity is fine
    assert bound(post(platform="telegram", chat_id="42", user={"id": "42"}), who).user.id == "42"


@pytest.mark.parametrize(
    "body",
    [
        {"platform": "telegram", "chat_id": "555", "user": {"id": "ceo"}},  # another platform and user
        {"user": {"id": "ceo"}},  # another user
        {"user": {"id": "key.k1", "team_id": "allowed-team"}},  # a team it does not have
        {"user": {"id": "key.k1", "tenant_id": "other"}},  # another tenant
        {"chat_id": "victim-chat"},  # someone else's chat
        {"profile": "allow-all"},  # a profile the key does not list
    ],
)
def test_claims_beyond_the_credential_are_refused(body: dict[str, object]):
    assert isinstance(bind_identity(post(**body), key(Scope.MESSAGES_WRITE)), Refused)


def test_listed_profiles_may_be_chosen():
    who = key(Scope.MESSAGES_WRITE, profiles=("support",))
    assert bound(post(profile="support"), who).profile == "support"
    assert isinstance(bind_identity(post(profile="other"), who), Refused)


def test_a_gateway_key_relays_users_of_its_platforms_only():
    gw = key(Scope.GATEWAY, gateway_platforms=("telegram",))
    body = {"platform": "telegram", "chat_id": "-100", "user": {"id": "7", "team_id": "g", "tenant_id": "evil"}}
    msg = bound(post(**body), gw)
    assert (msg.platform, msg.chat_id, msg.user.id, msg.user.team_id) == ("telegram", "-100", "7", "g")
    assert msg.user.tenant_id == "acme"  # the tenant is always the credential's
    assert isinstance(bind_identity(post(**{**body, "platform": "slack"}), gw), Refused)
    assert isinstance(bind_identity(post(platform="telegram", text="x"), gw), Refused)  # names no user


def test_an_operator_credential_keeps_the_claimed_tenant():
    op = key(Scope.ADMIN, tenant_id=ALL_TENANTS)
    msg = bound(post(platform="slack", chat_id="C1", user={"id": "U1", "tenant_id": "t9"}), op)
    assert msg.user.tenant_id == "t9"
    assert bound(post(platform="slack", chat_id="C1", user={"id": "U1"}), op).user.tenant_id == "default"


def test_a_key_without_messages_write_cannot_post():
    assert isinstance(bind_identity(post(), key(Scope.CONVERSATIONS_READ)), Refused)


def test_each_credential_is_its_own_dedupe_source():
    assert source_of(key(Scope.MESSAGES_WRITE)) == "api:k1"
    assert source_of(key(Scope.MESSAGES_WRITE, subject="k2")) == "api:k2"
    long = source_of(key(Scope.MESSAGES_WRITE, subject="jwt:" + "s" * 300))
    assert long.startswith("api:h.") and len(long) < 64
