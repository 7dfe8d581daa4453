"""The ordered pipeline: each step's decision, and that nothing else happened."""

import json
import uuid

import pytest

from agentstream.config import IngressTexts, load_settings
from agentstream.contracts import InterruptRun, NoticeLevel, ReplyTarget, ResetConversation
from agentstream_ingress.decisions import (
    CommandDecision,
    DeadLetterDecision,
    DropDecision,
    DropReason,
    NoticeDecision,
    NoticeReason,
    StartDecision,
)
from agentstream_ingress.pipeline import Pipeline

HOOKS = "tests.unit.ingress.hookfns"


def pipeline(ports, **overrides):  # type: ignore[no-untyped-def]
    return Pipeline(load_settings(**overrides), ports)


async def test_valid_message_starts_a_run_keyed_by_conversation(ports, raw):
    d = await pipeline(ports).decide(raw(thread_id="7"))
    assert isinstance(d, StartDecision)
    assert d.start.conversation_key == "telegram:42:7" == d.queued.conversation_key
    assert d.start.run_id == d.queued.run_id == d.queued.root_run_id
    assert d.queued.seq == 0 and d.queued.inbound_id == "m-1"
    assert d.start.assistant_id == "default" and d.start.metadata["profile"] == "default"
    assert d.start.reply_target.thread_id == "7"
    assert ports.started == [("hello", d.start.run_id)]


async def test_a_message_decided_again_starts_the_same_run_under_the_same_ids(ports, raw):
    # a batch read again after a crash before its dedupe rows were written (docs/decisions.md)
    first = await pipeline(ports).decide(raw())
    ports.seen.clear()  # the dedupe rows were never written
    again = await pipeline(ports).decide(raw())
    assert isinstance(first, StartDecision) and isinstance(again, StartDecision)
    ids = (first.start.run_id, first.start.id, first.queued.id)
    assert (again.start.run_id, again.start.id, again.queued.id) == ids and len(set(ids)) == 3
    other = await pipeline(ports).decide(raw(source="api"))  # another source's message of that id: another run
    assert isinstance(other, StartDecision) and other.start.run_id != first.start.run_id
    assert str(uuid.UUID(first.start.run_id)) == first.start.run_id


async def test_the_run_ids_derive_from_the_records_place_in_inbound_too(ports, raw):
    async def start_at(position: tuple[int, int]) -> str:
        ports.seen.clear()  # no dedupe row: decided as if never seen
        [d] = await pipeline(ports).decide_batch([raw()], [position])
        assert isinstance(d, StartDecision)
        return d.start.run_id

    first = await start_at((1, 40))
    assert await start_at((1, 40)) == first  # the same record read again: the same run
    # the id reused once its dedupe row was purged is another record: another run
    assert len({first, await start_at((1, 41)), await start_at((0, 40))}) == 3


async def test_not_json_and_invalid_records_are_dead_letters(ports, raw):
    p = pipeline(ports)
    d = await p.decide(b"\xff not json")
    assert isinstance(d, DeadLetterDecision) and d.error.startswith("not valid JSON") and d.notify is None
    d = await p.decide(raw(user="not-an-object"))
    assert isinstance(d, DeadLetterDecision) and "user" in d.error
    assert d.notify is not None and d.notify.chat_id == "42"
    body = json.loads(raw())
    del body["chat_id"]
    d = await p.decide(json.dumps(body).encode())
    assert isinstance(d, DeadLetterDecision) and "chat_id: Field required" in d.error and d.notify is None
    assert ports.seen == set() and ports.started == []  # nothing recorded for unusable records


async def test_huge_text_is_a_dead_letter_with_a_notice(ports, raw):
    d = await pipeline(ports, ingress={"max_text_chars": 10}).decide(raw(text="x" * 11))
    assert isinstance(d, DeadLetterDecision) and "longer than 10" in d.error and d.notify is not None


async def test_the_same_message_twice_is_dropped(ports, raw):
    p = pipeline(ports)
    assert isinstance(await p.decide(raw()), StartDecision)
    assert await p.decide(raw(text="changed")) == DropDecision(DropReason.DUPLICATE)
    assert isinstance(await p.decide(raw(platform="slack")), StartDecision)  # ids are unique per platform
    assert len(ports.started) == 2


async def test_ids_are_deduped_per_source(ports, raw):
    p = pipeline(ports)
    assert isinstance(await p.decide(raw(id="42:9", source="api")), StartDecision)  # a squatter first
    assert isinstance(await p.decide(raw(id="42:9", source="webhook:telegram:main")), StartDecision)
    assert isinstance(await p.decide(raw(id="42:9")), StartDecision)  # straight from Kafka: source "kafka"
    assert await p.decide(raw(id="42:9", source="kafka")) == DropDecision(DropReason.DUPLICATE)
    assert await p.decide(raw(id="42:9", source="webhook:telegram:main")) == DropDecision(DropReason.DUPLICATE)
    assert ports.seen == {
        ("api", "telegram", "42:9"),
        ("webhook:telegram:main", "telegram", "42:9"),
        ("kafka", "telegram", "42:9"),
    }


@pytest.mark.parametrize("over", [{"metadata": {"origin": "agentstream"}}, {"user": {"id": "bot-7"}}])
async def test_self_echo_is_dropped(ports, raw, over):
    p = pipeline(ports, authz={"bot_user_ids": {"telegram": ["bot-7"]}})
    assert await p.decide(raw(**over)) == DropDecision(DropReason.SELF_ECHO)
    assert ports.started == []


async def test_refused_user_gets_a_notice_and_no_run(ports, raw):
    p = pipeline(ports, authz={"platforms": {"telegram": {"users": ["alice"]}}})
    d = await p.decide(raw(chat_id="u-1"))
    assert isinstance(d, NoticeDecision) and d.reason is NoticeReason.REFUSED
    assert ports.issued == []  # an allowlist exists: no pairing
    assert isinstance(await p.decide(raw(id="m-2", user={"id": "alice"})), StartDecision)


async def test_unknown_user_in_direct_chat_gets_a_pairing_code_then_pairing_lets_through(ports, raw):
    p = pipeline(ports, authz={"default": {"allow_all": False}})
    d = await p.decide(raw(chat_id="u-1"))
    assert isinstance(d, NoticeDecision) and d.reason is NoticeReason.PAIRING and "ABCD2345" in d.text
    assert ports.issued == [("telegram", "u-1", "u-1")]
    group = await p.decide(raw(id="m-2", metadata={"chat_type": "group"}))
    assert isinstance(group, NoticeDecision) and group.reason is NoticeReason.REFUSED  # groups never pair
    ports.paired.add(("telegram", "u-1"))
    assert isinstance(await p.decide(raw(id="m-3")), StartDecision)


async def test_rate_limited_user_gets_a_notice(ports, raw):
    p = pipeline(ports, authz={"rate_limit": {"capacity": 2, "refill_per_s": 0.001}})
    decisions = [await p.decide(raw(id=f"m-{i}")) for i in range(3)]
    assert [type(d).__name__ for d in decisions] == ["StartDecision", "StartDecision", "NoticeDecision"]
    assert decisions[2].reason is NoticeReason.RATE_LIMITED
    assert isinstance(await p.decide(raw(id="m-9", user={"id": "other"})), StartDecision)  # per user


async def test_receive_hooks_deny_rewrite_handle(ports, raw):
    p = pipeline(ports, ingress={"hooks": {"message_received": [f"{HOOKS}:receive", f"{HOOKS}:broken"]}})
    d = await p.decide(raw(id="a", text="please deny"))
    assert isinstance(d, NoticeDecision) and d.reason is NoticeReason.HOOK_DENIED and d.text == "denied by hook"
    d = await p.decide(raw(id="b", text="please rewrite"))
    assert isinstance(d, StartDecision) and d.start.text == "rewritten"
    assert await p.decide(raw(id="c", text="please handle")) == DropDecision(DropReason.HANDLED)
    d = await p.decide(raw(id="d", text="please answer"))
    assert isinstance(d, NoticeDecision) and d.text == "answered by hook"
    assert [text for text, _ in ports.started] == ["rewritten"]


async def test_commands_produce_run_commands_not_runs(ports, raw):
    p = pipeline(ports)
    d = await p.decide(raw(id="a", text="/stop"))
    assert isinstance(d, CommandDecision) and isinstance(d.commands[0], InterruptRun)
    d = await p.decide(raw(id="b", text="/new"))
    assert isinstance(d, CommandDecision) and isinstance(d.commands[0], ResetConversation)
    assert d.commands[0].conversation_key == "telegram:42"
    assert ports.started == []


async def test_command_hooks_run_before_the_builtin(ports, raw):
    p = pipeline(ports, ingress={"hooks": {"commands": {"stop": [f"{HOOKS}:no_stop"], "help": [f"{HOOKS}:to_text"]}}})
    d = await p.decide(raw(id="a", text="/stop"))
    assert isinstance(d, NoticeDecision) and d.reason is NoticeReason.HOOK_DENIED
    d = await p.decide(raw(id="b", text="/help"))
    assert isinstance(d, StartDecision) and d.start.text == "not a command any more"


async def test_model_override_is_stored_and_sent_as_connector_role(ports, raw):
    p = pipeline(ports, roles={"smart": "demo"})
    d = await p.decide(raw(id="a", text="/model smart"))
    assert isinstance(d, NoticeDecision) and "smart" in d.text
    assert ports.roles == {"telegram:42": "smart"}
    d = await p.decide(raw(id="b", text="hi"))
    assert isinstance(d, StartDecision) and d.start.options.connector == "use::smart"


async def test_profile_routing_picks_assistant_role_and_policy(ports, raw):
    p = pipeline(
        ports,
        profiles={
            "support": {
                "assistant": "helper",
                "connector_role": "fast",
                "double_texting": "interrupt",
                "delivery": {"edit_interval": 2},
            }
        },
        routes=[{"platform": "telegram", "chat": "42", "profile": "support"}],
    )
    d = await p.decide(raw())
    assert isinstance(d, StartDecision) and d.start.assistant_id == "helper"
    assert d.start.options.as_dict() == {
        "connector": "use::fast",
        "double_texting": "interrupt",
        "delivery": {"edit_interval": 2},
    }
    assert d.start.metadata["profile"] == "support"


async def test_profile_denylist_refuses(ports, raw):
    p = pipeline(
        ports, profiles={"vip": {"authz": {"deny_users": ["u-1"]}}}, routes=[{"platform": "telegram", "profile": "vip"}]
    )
    d = await p.decide(raw())
    assert isinstance(d, NoticeDecision) and d.reason is NoticeReason.REFUSED


async def test_a_batch_decides_in_order_and_dedupes_inside_itself(ports, raw):
    p = pipeline(ports, roles={"smart": "demo"})
    decisions = await p.decide_batch(
        [
            raw(id="a"),
            raw(id="a"),
            b"nope",
            raw(id="b", text="/model smart"),
            raw(id="c", text="after"),
            raw(id="d", text="/retry"),
        ]
    )
    kinds = [type(d).__name__ for d in decisions]
    # (the fake's facts know no last message, so /retry answers with a notice)
    assert kinds == [
        "StartDecision",
        "DropDecision",
        "DeadLetterDecision",
        "NoticeDecision",
        "StartDecision",
        "NoticeDecision",
    ]
    assert decisions[4].start.options.connector == "use::smart"  # the override from earlier in the batch
    assert [text for text, _ in ports.started] == ["hello", "after"]


def test_a_route_to_an_unknown_profile_is_a_startup_error(ports):
    with pytest.raises(ValueError, match="unknown profiles: typo"):
        pipeline(ports, routes=[{"platform": "web", "profile": "typo"}])


async def test_started_runs_are_remembered_behind_the_batch_and_before_the_next(ports, raw):
    import asyncio

    gate = asyncio.Event()
    remember = ports.remember_starts

    async def slow_remember(started):  # type: ignore[no-untyped-def]
        await gate.wait()
        await remember(started)

    ports.remember_starts = slow_remember
    p = pipeline(ports)
    first = await p.decide_batch([raw(id="a")])  # returns while the database write is still going on
    assert isinstance(first[0], StartDecision) and ports.started == []
    nxt = asyncio.create_task(p.decide_batch([raw(id="b", text="/status")]))
    await asyncio.sleep(0.01)
    assert not nxt.done()  # the next batch reads nothing before the previous one is remembered
    gate.set()
    await nxt
    assert ports.started == [("hello", first[0].start.run_id)]


async def test_a_message_batch_is_decided_while_the_previous_runs_are_remembered_in_order(ports, raw):
    import asyncio

    gate = asyncio.Event()
    remember = ports.remember_starts

    async def slow_remember(started):  # type: ignore[no-untyped-def]
        await gate.wait()
        await remember(started)

    ports.remember_starts = slow_remember
    p = pipeline(ports)
    first = await p.decide_batch([raw(id="a", text="one")])
    second = await asyncio.wait_for(p.decide_batch([raw(id="b", text="two")]), 5)  # not held by the first write
    assert isinstance(second[0], StartDecision) and ports.started == []
    gate.set()
    await p.settle()
    assert ports.started == [("one", first[0].start.run_id), ("two", second[0].start.run_id)]


async def test_a_failed_remember_does_not_fail_the_batch_that_started_the_runs(ports, raw):
    async def broken(started):  # type: ignore[no-untyped-def]
        raise RuntimeError("database went away")

    ports.remember_starts = broken
    p = pipeline(ports)
    assert isinstance(await p.decide(raw(id="a")), StartDecision)
    assert isinstance(await p.decide(raw(id="b")), StartDecision)


def test_every_unknown_profile_of_the_routes_is_named():
    with pytest.raises(ValueError, match="unknown profiles: other, typo$"):
        Pipeline(
            load_settings(
                routes=[{"platform": "web", "profile": "typo"}, {"platform": "slack", "profile": "other"}],
            ),
            None,  # type: ignore[arg-type]
        )


async def test_the_rate_limit_notice_warns_the_sender_in_their_chat(ports, raw):
    p = pipeline(ports, authz={"rate_limit": {"capacity": 1, "refill_per_s": 0.001}})
    assert isinstance(await p.decide(raw(id="a", thread_id="7")), StartDecision)
    d = await p.decide(raw(id="b", thread_id="7", reply_to_id="a"))
    assert d == NoticeDecision(
        NoticeReason.RATE_LIMITED,
        IngressTexts().rate_limited,
        ReplyTarget(platform="telegram", chat_id="42", thread_id="7", reply_to_id="a"),
        NoticeLevel.WARNING,
    )
    # buckets are per platform and user: the same user id elsewhere is someone else
    assert isinstance(await p.decide(raw(id="c", platform="slack")), StartDecision)


async def test_a_refusal_warns_the_sender_in_their_chat(ports, raw):
    p = pipeline(ports, authz={"platforms": {"telegram": {"users": ["alice"]}}})
    d = await p.decide(raw(thread_id="7"))
    assert d == NoticeDecision(
        NoticeReason.REFUSED,
        IngressTexts().refused,
        ReplyTarget(platform="telegram", chat_id="42", thread_id="7"),
        NoticeLevel.WARNING,
    )


async def test_the_notices_speak_the_platforms_texts(ports, raw):
    texts = {
        "default": {"refused": "Nicht erlaubt.", "rate_limited": "Langsamer, bitte."},
        "slack": {"refused": "Not for you."},
    }
    p = pipeline(
        ports,
        authz={"default": {"users": ["alice"]}, "rate_limit": {"capacity": 1, "refill_per_s": 0.001}},
        ingress={"texts": texts},
    )
    refused = [await p.decide(raw(id=f"r{n}", platform=platform)) for n, platform in enumerate(["telegram", "slack"])]
    assert [d.text for d in refused] == ["Nicht erlaubt.", "Not for you."]  # type: ignore[union-attr]
    assert isinstance(await p.decide(raw(id="a", user={"id": "alice"})), StartDecision)
    d = await p.decide(raw(id="b", user={"id": "alice"}))
    assert isinstance(d, NoticeDecision) and d.text == "Langsamer, bitte."


async def test_the_pairing_code_goes_to_the_senders_chat(ports, raw):
    p = pipeline(ports, authz={"default": {"allow_all": False}})
    d = await p.decide(raw(chat_id="u-1"))
    assert isinstance(d, NoticeDecision) and d.target == ReplyTarget(platform="telegram", chat_id="u-1")


async def test_naming_another_profile_does_not_escape_the_routed_profiles_deny_list(ports, raw):
    p = pipeline(
        ports,
        profiles={"vip": {"authz": {"deny_users": ["u-1"]}}, "open": {}},
        routes=[{"platform": "telegram", "profile": "vip"}],
    )
    d = await p.decide(raw(profile="open"))
    assert isinstance(d, NoticeDecision) and d.reason is NoticeReason.REFUSED
    assert isinstance(await p.decide(raw(id="m-2", user={"id": "u-2"}, profile="open")), StartDecision)


async def test_a_broken_hook_is_skipped_and_the_next_hook_still_runs(ports, raw):
    p = pipeline(ports, ingress={"hooks": {"message_received": [f"{HOOKS}:broken", f"{HOOKS}:receive"]}})
    d = await p.decide(raw(text="please deny", thread_id="7"))
    assert d == NoticeDecision(
        NoticeReason.HOOK_DENIED,
        "denied by hook",
        ReplyTarget(platform="telegram", chat_id="42", thread_id="7"),
        NoticeLevel.WARNING,
    )
    d = await p.decide(raw(id="m-2", text="please answer", thread_id="7"))
    assert d == NoticeDecision(
        NoticeReason.HOOK_HANDLED, "answered by hook", ReplyTarget(platform="telegram", chat_id="42", thread_id="7")
    )


async def test_a_hook_that_handles_with_an_empty_reply_sends_an_empty_notice(ports, raw):
    p = pipeline(ports, ingress={"hooks": {"message_received": [f"{HOOKS}:answer_nothing"]}})
    d = await p.decide(raw())
    assert isinstance(d, NoticeDecision) and (d.reason, d.text) == (NoticeReason.HOOK_HANDLED, "")


async def test_command_hooks_are_named_with_or_without_slash_in_any_case_and_get_the_command(ports, raw):
    p = pipeline(ports, ingress={"hooks": {"commands": {"/Stop": [f"{HOOKS}:name_the_command"]}}})
    d = await p.decide(raw(text="/stop"))
    assert isinstance(d, NoticeDecision) and d.text == "no /stop for you"


async def test_a_command_rewritten_to_text_starts_with_the_conversations_model_override(ports, raw):
    p = pipeline(ports, roles={"smart": "demo"}, ingress={"hooks": {"commands": {"help": [f"{HOOKS}:to_text"]}}})
    await p.decide(raw(id="a", text="/model smart"))
    d = await p.decide(raw(id="b", text="/help"))
    assert isinstance(d, StartDecision) and d.start.options.connector == "use::smart"


async def test_a_command_reads_the_facts_of_its_conversation(ports, raw):
    await pipeline(ports).decide(raw(text="/status", thread_id="7"))
    assert ports.facts_asked == ["telegram:42:7"]


async def test_a_failed_lookup_raises_only_after_the_sightings_are_claimed(ports, raw):
    import asyncio

    claim = ports.first_sightings

    async def slow_claim(idents):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.01)
        return await claim(idents)

    async def broken_roles(keys):  # type: ignore[no-untyped-def]
        raise RuntimeError("database went away")

    ports.first_sightings, ports.role_overrides = slow_claim, broken_roles
    with pytest.raises(RuntimeError, match="database went away"):
        await pipeline(ports).decide_batch([raw()])
    assert ports.seen == {("kafka", "telegram", "m-1")}
