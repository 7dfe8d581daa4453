"""In-memory ports for the ingress pipeline's unit tests (the database ports are tested on their own)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from agentstream_ingress.commands import ConversationFacts
from agentstream_ingress.pairing import Issue, IssueOutcome


@dataclass
class FakePorts:
    seen: set[tuple[str, str, str]] = field(default_factory=set)
    paired: set[tuple[str, str]] = field(default_factory=set)
    issued: list[tuple[str, str, str]] = field(default_factory=list)
    roles: dict[str, str | None] = field(default_factory=dict)
    started: list[tuple[str, str]] = field(default_factory=list)
    conversation: ConversationFacts = field(default_factory=ConversationFacts)
    facts_asked: list[str] = field(default_factory=list)

    async def first_sightings(self, idents):  # type: ignore[no-untyped-def]
        fresh = set(idents) - self.seen
        self.seen |= fresh
        return fresh

    async def is_paired(self, platform: str, user_id: str) -> bool:
        return (platform, user_id) in self.paired

    async def issue_pairing(self, platform: str, user_id: str, chat_id: str) -> Issue:
        self.issued.append((platform, user_id, chat_id))
        return Issue(IssueOutcome.ISSUED, "ABCD2345")

    async def role_overrides(self, keys):  # type: ignore[no-untyped-def]
        return {k: self.roles[k] for k in keys if k in self.roles}

    async def facts(self, key: str) -> ConversationFacts:
        self.facts_asked.append(key)
        return self.conversation

    async def set_role(self, key: str, role: str | None) -> None:
        self.roles[key] = role

    async def remember_starts(self, started):  # type: ignore[no-untyped-def]
        self.started.extend((msg.text, run_id) for msg, run_id in started)


@pytest.fixture
def ports() -> FakePorts:
    return FakePorts()


def _raw(**over: object) -> bytes:
    body: dict[str, object] = {
        "id": "m-1",
        "platform": "telegram",
        "chat_id": "42",
        "user": {"id": "u-1"},
        "text": "hello",
    }
    body.update(over)
    return json.dumps(body).encode()


@pytest.fixture
def raw():  # type: ignore[no-untyped-def]
    """raw(**fields) → the bytes of a valid InboundMessage with those fields changed."""
    return _raw
