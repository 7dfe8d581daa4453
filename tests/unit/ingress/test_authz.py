"""authz: who may start runs (allow/deny lists of platform and profile), direct chats, self-echo."""

import pytest

from agentstream.config.ingress import AuthzRule, AuthzSettings
from agentstream.contracts import InboundMessage
from agentstream_ingress.authz import Verdict, authorize, is_direct_chat, is_self_echo


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


def test_a_bypassed_profile_still_denies_its_denied_users_and_teams_but_allows_no_one():
    allow_all = AuthzRule(allow_all=True)
    assert authorize(msg(), allow_all, None, deny_only=AuthzRule(deny_users=["u"])) is Verdict.DENIED
    assert authorize(msg(), allow_all, None, deny_only=AuthzRule(deny_teams=["T1"])) is Verdict.DENIED
    assert authorize(msg(), AuthzRule(), None, deny_only=AuthzRule(users=["u"], allow_all=True)) is Verdict.UNKNOWN


def test_direct_chat_and_self_echo():
    assert is_direct_chat(msg(metadata={"chat_type": "im"}))
    assert is_direct_chat(msg(chat_id="u"))
    assert not is_direct_chat(msg(chat_id="u", metadata={"chat_type": "group"}))
    authz = AuthzSettings(bot_user_ids={"slack": ["B1"]})
    assert is_self_echo(msg(metadata={"origin": "agentstream"}), authz)
    assert is_self_echo(msg(user={"id": "B1"}), authz)
    assert not is_self_echo(msg(user={"id": "B1"}, platform="telegram"), authz)
    assert not is_self_echo(msg(), authz)
