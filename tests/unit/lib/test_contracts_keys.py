"""The conversation key carries the tenant, except the default tenant's (docs/topics.md § Keys)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentstream.contracts import InboundMessage, ReplyTarget, User, conversation_key
from agentstream.contracts.keys import ConversationParts, split_conversation_key


def message(tenant: str | None, **fields: object) -> InboundMessage:
    values: dict[str, object] = {"id": "m1", "platform": "web", "chat_id": "alice", "text": "hi"}
    return InboundMessage.model_validate({**values, **fields, "user": {"id": "alice", "tenant_id": tenant}})


@pytest.mark.parametrize(
    ("tenant", "key"),
    [(None, "web:alice"), ("default", "web:alice"), ("acme", "acme/web:alice"), ("beta", "beta/web:alice")],
)
def test_the_tenant_is_in_every_key_but_the_default_tenants(tenant, key):
    msg = message(tenant)
    assert msg.conversation_key == key
    assert conversation_key("web", "alice", tenant_id=tenant) == key
    assert ReplyTarget(platform="web", chat_id="alice", tenant_id=tenant).conversation_key == key


def test_threads_stay_last_and_keys_read_back():
    assert conversation_key("slack", "C1", "T9", tenant_id="acme") == "acme/slack:C1:T9"
    assert split_conversation_key("acme/slack:C1:T9") == ConversationParts("acme", "slack", "C1", "T9")
    assert split_conversation_key("slack:C1") == ConversationParts("default", "slack", "C1", None)
    # A `/` after the first `:` is the chat's, not a tenant's end.
    assert split_conversation_key("webhook:a/b:t") == ConversationParts("default", "webhook", "a/b", "t")


def test_dedupe_counts_an_id_per_tenant_and_stays_within_its_column():
    assert message(None).dedupe_key == ("kafka", "web", "m1")
    assert message("acme", source="api:k1").dedupe_key == ("acme/api:k1", "web", "m1")
    long = message("t" * 256, source="s" * 256, chat_id="c").dedupe_key[0]
    assert len(long) <= 256 and long.startswith("h.")


def test_a_key_too_long_for_its_columns_is_refused_not_cut():
    with pytest.raises(ValidationError, match="longer than 512"):
        message("t" * 200, chat_id="c" * 200, thread_id="x" * 150)
    assert User(id="u", tenant_id="t" * 256)  # the tenant alone is fine


@pytest.mark.parametrize(
    "fields",
    [
        {"user": {"id": "alice", "tenant_id": "acme/web"}},  # would read as tenant acme, platform web…
        {"user": {"id": "alice", "tenant_id": "x:y"}},
        {"platform": "acme/web"},  # the default tenant's "acme/web:alice" would be acme's key
    ],
)
def test_no_tenant_or_platform_can_spell_another_tenants_key(fields):
    body = {"id": "m1", "platform": "web", "chat_id": "alice", "user": {"id": "alice"}, "text": "hi", **fields}
    with pytest.raises(ValidationError):
        InboundMessage.model_validate(body)
