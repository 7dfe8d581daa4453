"""Relay rules: which targets mirror a run, which answers are forwarded, and no forwarding loops."""

from __future__ import annotations

from agentstream.config.delivery import RelayRule
from agentstream.contracts import ReplyTarget, RunFinished, RunQueued
from agentstream_delivery.relay import RELAY_ID_PREFIX, Relay

SRC = ReplyTarget(platform="telegram", chat_id="42")
OTHER = ReplyTarget(platform="telegram", chat_id="43")


def rules() -> list[RelayRule]:
    return [
        RelayRule.model_validate(r)
        for r in [
            {"match": {"platform": "telegram", "chat_id": "42"}, "to": {"platform": "slack", "chat_id": "C1"}},
            {"match": {"platform": "telegram"}, "to": {"platform": "memory", "chat_id": "audit"}},
            {"match": {"platform": "telegram"}, "to": {"platform": "memory", "chat_id": "audit"}},  # duplicate
            {"match": {"chat_id": "42"}, "to": {"platform": "telegram", "chat_id": "42"}},  # itself: ignored
            {"match": {"chat_id": "42"}, "to": {"platform": "web", "chat_id": "review"}, "profile": "reviewer"},
        ]
    ]


def finished(run: str, status: str = "completed", text: str = "the answer") -> RunFinished:
    return RunFinished(run_id=run, root_run_id=run, conversation_key="telegram:42", seq=9, status=status, text=text)


def test_mirrors_match_source_without_duplicates_or_self() -> None:
    relay = Relay(rules())
    assert relay.mirrors(SRC) == [
        ReplyTarget(platform="slack", chat_id="C1"),
        ReplyTarget(platform="memory", chat_id="audit"),
    ]
    assert relay.mirrors(OTHER) == [ReplyTarget(platform="memory", chat_id="audit")]
    assert relay.mirrors(ReplyTarget(platform="web", chat_id="x")) == []


def test_forward_builds_an_idempotent_inbound_message_for_the_profile() -> None:
    relay = Relay(rules())
    (msg,) = relay.forwards(SRC, finished("r1"))
    assert (msg.platform, msg.chat_id, msg.profile, msg.text) == ("web", "review", "reviewer", "the answer")
    assert msg.id == f"{RELAY_ID_PREFIX}r1:4"  # same run, same id: ingress dedupes a replay
    assert msg.metadata["relay_from"] == "telegram:42"
    assert relay.forwards(OTHER, finished("r2")) == []


def test_only_completed_answers_with_text_are_forwarded() -> None:
    relay = Relay(rules())
    assert relay.forwards(SRC, finished("r1", status="failed")) == []
    assert relay.forwards(SRC, finished("r1", text="  ")) == []


def test_a_forwarded_run_is_not_forwarded_again() -> None:
    relay = Relay(rules())
    relay.note_queued(
        RunQueued(
            run_id="r9",
            root_run_id="r9",
            conversation_key="web:review",
            seq=0,
            assistant_id="a",
            reply_target=SRC,
            inbound_id=f"{RELAY_ID_PREFIX}r1:4",
        )
    )
    assert relay.forwards(SRC, finished("r9")) == []
    assert len(relay.forwards(SRC, finished("r10"))) == 1
