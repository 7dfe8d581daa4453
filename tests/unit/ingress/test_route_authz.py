"""route_authz: the profile routing resolves (not only a named one) and a named assistant must be the
credential's to use; `metadata.bot` is identity only from a gateway asserting the message."""

from __future__ import annotations

import pytest

from agentstream.auth import CredentialKind, Principal, Scope
from agentstream.config import load_settings
from agentstream.contracts import InboundMessage
from agentstream_ingress.identity import Refused
from agentstream_ingress.route_authz import authorize_route

SETTINGS = load_settings(
    profiles={"vip": {"assistant": "vip-bot"}, "support": {"assistant": "support-bot"}, "bare": {}},
    routes=[{"bot": "premium", "profile": "vip"}, {"platform": "api", "profile": "support"}],
)


def principal(*scopes: Scope, profiles: tuple[str, ...] = (), gateway: tuple[str, ...] = ()) -> Principal:
    return Principal(
        subject="k1",
        kind=CredentialKind.API_KEY,
        tenant_id="acme",
        scopes=frozenset(scopes),
        profiles=profiles,
        gateway_platforms=gateway,
    )


def msg(platform: str = "api", **fields: object) -> InboundMessage:
    body: dict[str, object] = {"id": "m", "platform": platform, "chat_id": "c", "user": {"id": "u"}, "text": "x"}
    return InboundMessage.model_validate({**body, **fields})


WRITER = principal(Scope.MESSAGES_WRITE)


@pytest.mark.parametrize(
    ("fields", "refused_because"),
    [
        ({"metadata": {"bot": "premium"}}, "profile 'vip'"),
        ({"profile": "vip"}, "profile 'vip'"),
        ({"assistant_id": "vip-bot"}, "assistant 'vip-bot'"),
        ({"assistant_id": "default"}, "assistant 'default'"),  # its profile runs support-bot, not default
    ],
)
def test_a_writer_cannot_reach_what_its_identity_does_not_route_to(fields, refused_because):
    refused = authorize_route(msg(**fields), WRITER, SETTINGS)
    assert isinstance(refused, Refused) and refused_because in refused.detail


def test_what_its_identity_routes_to_and_what_its_key_lists_are_fine():
    assert authorize_route(msg(), WRITER, SETTINGS) is None
    assert authorize_route(msg(assistant_id="support-bot"), WRITER, SETTINGS) is None
    assert authorize_route(msg(metadata={"bot": "other"}), WRITER, SETTINGS) is None  # still routed to support
    vip = principal(Scope.MESSAGES_WRITE, profiles=("vip",))
    assert authorize_route(msg(metadata={"bot": "premium"}), vip, SETTINGS) is None
    assert authorize_route(msg(assistant_id="vip-bot"), vip, SETTINGS) is None
    # A profile without an assistant of its own runs the default assistant.
    bare = principal(Scope.MESSAGES_WRITE, profiles=("bare",))
    assert authorize_route(msg(assistant_id="default"), bare, SETTINGS) is None


def test_a_gateways_bot_is_part_of_the_identity_it_asserts_and_admin_may_use_anything():
    gateway = principal(Scope.GATEWAY, gateway=("telegram",))
    assert authorize_route(msg("telegram", metadata={"bot": "premium"}), gateway, SETTINGS) is None
    refused = authorize_route(msg("telegram", assistant_id="support-bot"), gateway, SETTINGS)
    assert isinstance(refused, Refused)  # telegram routes to the default profile: its assistant only
    admin = principal(Scope.ADMIN)
    assert authorize_route(msg(metadata={"bot": "premium"}, assistant_id="anything"), admin, SETTINGS) is None
