"""The ingress tables on SQLite and PostgreSQL: dedupe, pairing, conversation memory."""

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text

from agentstream.config.ingress import PairingSettings
from agentstream.contracts import InboundMessage
from agentstream.db import Run, create_engine, session_factory, upgrade
from agentstream.db.models_ingress import InboundDedupe, IngressConversation, PairingCode
from agentstream_ingress.pairing import ALPHABET, CODE_LENGTH, ApproveOutcome, IssueOutcome, hash_code
from agentstream_ingress.pairing_store import PairingStore
from agentstream_ingress.store import IngressStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def sessions(db_url):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


async def test_dedupe_records_each_source_platform_id_once(sessions):
    store = IngressStore(sessions)
    tg, api, slack = ("webhook:telegram:main", "telegram", "1:5"), ("api", "telegram", "1:5"), ("api", "slack", "1:5")
    assert await store.first_sightings([api, api]) == {api}
    # claimed by a batch in flight: a duplicate for this process, not yet for the database
    assert await store.first_sightings([tg, api, slack]) == {tg, slack}
    assert await store.first_sightings([tg, ("kafka", "telegram", "1:5")]) == {("kafka", "telegram", "1:5")}
    assert await IngressStore(sessions).first_sightings([api]) == {api}
    assert await store.first_sightings([]) == set()
    kafka = ("kafka", "telegram", "1:5")
    assert sorted(store.take_claims()) == sorted([api, tg, slack, kafka]) and store.take_claims() == []
    await store.record_sightings([api, tg, slack])
    await store.record_sightings([api])  # recording twice is harmless
    fresh = ("api", "x", "1")
    assert await IngressStore(sessions).first_sightings([api, tg, slack, kafka, fresh]) == {kafka, fresh}


async def test_dedupe_keeps_ids_of_any_text_as_they_are(sessions):
    """The batch goes to the database as JSON (escaped non-ASCII, quotes, backslashes): the
    rows hold the ids as sent, and a repeat of each is known."""
    store = IngressStore(sessions)
    odd = [("api:k", "web", 'ü "quoted" \\ 😀'), ("kafka", "télé", "[1, 2]"), ("t/kafka", "web", "null")]
    assert await store.first_sightings(odd) == set(odd)
    await store.record_sightings(store.take_claims())
    async with sessions() as s:
        stored = (await s.execute(select(InboundDedupe.source, InboundDedupe.platform, InboundDedupe.message_id))).all()
    assert sorted(tuple(row) for row in stored) == sorted(odd)
    assert await IngressStore(sessions).first_sightings([*odd, ("api:k", "web", "ü")]) == {("api:k", "web", "ü")}


async def test_dedupe_migration_keeps_old_rows_as_source_kafka(db_url):
    from alembic import command

    from agentstream.db.session import alembic_config

    await upgrade(db_url, "0006")
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO inbound_dedupe (platform, message_id, received_at) VALUES ('telegram', '1:5', :at)"),
                {"at": T0},
            )
        await upgrade(db_url)
        store = IngressStore(session_factory(engine))
        old, api = ("kafka", "telegram", "1:5"), ("api", "telegram", "1:5")
        assert await store.first_sightings([old, api]) == {api}  # the old row now belongs to `kafka`
        await store.record_sightings([api])
        await asyncio.to_thread(command.downgrade, alembic_config(db_url), "0008-1")
        async with engine.connect() as conn:  # both sightings collapse into the one (platform, id) row
            rows = (await conn.execute(text("SELECT platform, message_id FROM inbound_dedupe"))).all()
        assert [tuple(r) for r in rows] == [("telegram", "1:5")]
        await upgrade(db_url)
        assert await IngressStore(session_factory(engine)).first_sightings([old, api]) == {api}
    finally:
        await engine.dispose()


async def test_pairing_issue_expiry_rate_limit_and_approval(sessions):
    store = PairingStore(sessions, PairingSettings())
    issue = await store.issue("telegram", "u1", "u1", now=T0)
    assert issue.outcome is IssueOutcome.ISSUED and issue.expires_at == T0 + timedelta(hours=1)
    code = issue.code
    assert code is not None and len(code) == CODE_LENGTH and set(code) <= set(ALPHABET)
    async with sessions() as s:  # only the hash is stored
        rows = (await s.scalars(select(PairingCode))).all()
    assert [r.code_hash for r in rows] == [hash_code(code)] and code not in rows[0].code_hash
    # at most one new code per user per 10 minutes
    assert (await store.issue("telegram", "u1", "u1", now=T0 + timedelta(minutes=9))).outcome is IssueOutcome.TOO_SOON
    assert (await store.issue("telegram", "u2", "u2", now=T0 + timedelta(minutes=9))).outcome is IssueOutcome.ISSUED
    # expired after an hour
    late = await store.approve(code, now=T0 + timedelta(hours=1, seconds=1))
    assert late.outcome is ApproveOutcome.EXPIRED
    fresh = await store.issue("telegram", "u1", "u1", now=T0 + timedelta(minutes=11))
    assert not await store.is_paired("telegram", "u1")
    ok = await store.approve(fresh.code.lower(), now=T0 + timedelta(minutes=12))
    assert (ok.outcome, ok.platform, ok.user_id) == (ApproveOutcome.APPROVED, "telegram", "u1")
    assert await store.is_paired("telegram", "u1")
    again = await store.approve(fresh.code, now=T0 + timedelta(minutes=13))
    assert again.outcome is ApproveOutcome.EXPIRED  # a code works once


async def test_five_failed_approvals_lock_the_platform_for_an_hour(sessions):
    store = PairingStore(sessions, PairingSettings())
    good = await store.issue("telegram", "u1", "u1", now=T0)
    other = await store.issue("slack", "u9", "D9", now=T0)
    for i in range(5):
        assert (await store.approve(f"WRONG{i:03d}", "telegram", now=T0)).outcome is ApproveOutcome.UNKNOWN
    locked = await store.approve(good.code, "telegram", now=T0 + timedelta(minutes=1))
    assert locked.outcome is ApproveOutcome.LOCKED
    assert (await store.issue("telegram", "u5", "u5", now=T0)).outcome is IssueOutcome.LOCKED
    assert (await store.approve(other.code, now=T0)).outcome is ApproveOutcome.APPROVED  # slack is not locked
    after = await store.approve(good.code, "telegram", now=T0 + timedelta(minutes=59, seconds=59))
    assert after.outcome is ApproveOutcome.LOCKED
    reopened = await store.approve(good.code, "telegram", now=T0 + timedelta(minutes=50, hours=1))
    assert reopened.outcome is ApproveOutcome.EXPIRED  # the code itself ran out meanwhile; lock is over


async def test_conversation_facts_role_retry_and_resumable(sessions):
    store = IngressStore(sessions)
    msg = InboundMessage(id="m", platform="web", chat_id="c", user={"id": "u"}, text="first")
    await store.remember_starts([(msg, "run-1")])
    await store.remember_starts([(msg.model_copy(update={"text": "second"}), "run-2")])
    await store.set_role("web:c", "smart")
    async with sessions() as s, s.begin():
        for run_id, status, minute in (("run-0", "interrupted", 1), ("run-1", "failed", 2)):
            s.add(
                Run(
                    run_id=run_id,
                    root_run_id=run_id,
                    conversation_key="web:c",
                    status=status,
                    text="",
                    prompt_tokens=0,
                    completion_tokens=0,
                    llm_calls=0,
                    duration_ms=0.0,
                    finished_at=T0 + timedelta(minutes=minute),
                )
            )
    facts = await store.facts("web:c")
    assert facts.role_override == "smart" and await store.role_overrides(["web:c", "x"]) == {"web:c": "smart"}
    assert facts.last_message is not None and facts.last_message.text == "second"
    assert facts.unfinished == ("run-2",)
    assert facts.resumable is not None and facts.resumable.run_id == "run-1" and facts.resumable.status == "failed"
    assert (await store.facts("web:other")).resumable is None


async def test_a_batch_whose_output_was_not_acked_is_decided_again(sessions):
    from agentstream.config import load_settings
    from agentstream.config.ingress import PairingSettings as Pairing
    from agentstream_ingress.decisions import DropDecision, DropReason, StartDecision
    from agentstream_ingress.pipeline import Pipeline
    from agentstream_ingress.store import DatabasePorts

    class Failing(DatabasePorts):
        async def role_overrides(self, keys):  # type: ignore[no-untyped-def]
            raise RuntimeError("database went away mid-batch")

    raw = b'{"id": "m-1", "platform": "web", "chat_id": "c", "user": {"id": "u"}, "text": "hi"}'
    failing = Failing(sessions, Pairing())
    with pytest.raises(RuntimeError):
        await Pipeline(load_settings(), failing).decide(raw)
    assert failing.take_claims() == [("kafka", "web", "m-1")]  # claimed, never recorded: the app releases it
    # a restarted ingress (or the re-read after the release) decides it again: nothing lost
    ports = DatabasePorts(sessions, Pairing())
    pipeline = Pipeline(load_settings(), ports)
    assert isinstance(await pipeline.decide(raw), StartDecision)
    claims = ports.take_claims()
    ports.release_sightings(claims)  # its output failed
    assert isinstance(await pipeline.decide(raw), StartDecision)
    await ports.record_sightings(ports.take_claims())  # its output is in Kafka
    assert await pipeline.decide(raw) == DropDecision(DropReason.DUPLICATE)
    restarted = Pipeline(load_settings(), DatabasePorts(sessions, Pairing()))
    assert await restarted.decide(raw) == DropDecision(DropReason.DUPLICATE)  # for good


def _run(run_id: str, status: str, minute: int, key: str = "web:c", parent: str | None = None) -> Run:
    return Run(
        run_id=run_id,
        root_run_id=parent or run_id,
        parent_run_id=parent,
        conversation_key=key,
        status=status,
        assistant_id=f"assistant-{run_id}",
        connector_id=f"connector-{run_id}",
        text="",
        prompt_tokens=0,
        completion_tokens=0,
        llm_calls=0,
        duration_ms=0.0,
        finished_at=T0 + timedelta(minutes=minute),
    )


async def test_facts_name_the_newest_root_runs_of_the_conversation_only(sessions):
    from agentstream_ingress.commands import RunSummary

    store = IngressStore(sessions)
    async with sessions() as s, s.begin():
        s.add_all(
            [
                _run("run-0", "interrupted", 1),
                _run("run-1", "failed", 2),
                _run("run-2", "completed", 3),
                _run("child", "failed", 4, parent="run-2"),  # a delegated run: not the conversation's
                _run("other", "failed", 5, key="web:other"),
            ]
        )
    facts = await store.facts("web:c")
    assert facts.resumable == RunSummary("run-1", "failed")
    assert facts.last_finished == RunSummary("run-2", "completed")
    assert (facts.role_override, facts.last_message, facts.unfinished) == (None, None, ())
    nothing = await store.facts("web:none")
    assert (nothing.resumable, nothing.last_finished) == (None, None)


async def test_the_runs_started_in_one_batch_are_all_pending_and_only_the_last_twenty_are_kept(sessions):
    store = IngressStore(sessions)
    msg = InboundMessage(id="m", platform="web", chat_id="c", user={"id": "u"}, text="hi")
    other = msg.model_copy(update={"chat_id": "d"})
    await store.remember_starts([(msg, "a-1"), (other, "b-1"), (msg, "a-2")])
    assert (await store.facts("web:c")).unfinished == ("a-1", "a-2")
    assert (await store.facts("web:d")).unfinished == ("b-1",)
    await store.set_role("web:c", "fast")
    await store.remember_starts([(msg, f"a-{n}") for n in range(3, 25)])
    facts = await store.facts("web:c")
    assert facts.unfinished == tuple(f"a-{n}" for n in range(5, 25))  # the 20 newest
    assert facts.role_override == "fast"  # remembering runs keeps the conversation's /model choice
    await store.set_role("web:new", "smart")
    assert (await store.facts("web:new")).role_override == "smart"


async def test_claims_of_earlier_batches_stay_claimed_until_recorded_or_released(sessions):
    store = IngressStore(sessions)
    a, b = ("api", "web", "a"), ("api", "web", "b")
    assert await store.first_sightings([a]) == {a}
    assert await store.first_sightings([b]) == {b}
    assert await store.first_sightings([a, b]) == set()


async def test_the_database_ports_issue_pairing_codes_and_answer_who_is_paired(sessions):
    from agentstream_ingress.store import DatabasePorts

    ports = DatabasePorts(sessions, PairingSettings())
    issue = await ports.issue_pairing("telegram", "u1", "chat-1")
    assert issue.outcome is IssueOutcome.ISSUED and issue.code is not None
    async with sessions() as s:
        [row] = (await s.scalars(select(PairingCode))).all()
    assert (row.platform, row.user_id, row.chat_id) == ("telegram", "u1", "chat-1")
    assert not await ports.is_paired("telegram", "u1")
    approved = await ports.pairing.approve(issue.code)
    assert approved.outcome is ApproveOutcome.APPROVED
    assert await ports.is_paired("telegram", "u1") and not await ports.is_paired("slack", "u1")


async def test_each_batch_adds_its_runs_to_those_already_pending_and_replaces_the_last_message(sessions):
    store = IngressStore(sessions)
    first = InboundMessage(id="m1", platform="web", chat_id="c", user={"id": "u"}, text="first")
    await store.set_role("web:c", "fast")  # the row exists, with no runs remembered yet
    await store.remember_starts([(first, "run-1")])
    await store.remember_starts([(first.model_copy(update={"id": "m2", "text": "second"}), "run-2")])
    facts = await store.facts("web:c")
    assert facts.unfinished == ("run-1", "run-2")
    assert facts.last_message is not None and (facts.last_message.id, facts.last_message.text) == ("m2", "second")
    assert facts.role_override == "fast"
    await store.remember_starts([(first, f"run-{n}") for n in range(3, 22)])
    assert (await store.facts("web:c")).unfinished == tuple(f"run-{n}" for n in range(2, 22))  # the 20 newest


async def test_a_run_started_again_by_a_re_read_batch_is_pending_once(sessions):
    # the re-read batch's run has the same derived id (starting.py): /status must not count it twice
    store = IngressStore(sessions)
    msg = InboundMessage(id="m1", platform="web", chat_id="c", user={"id": "u"}, text="hi")
    await store.remember_starts([(msg, "run-1"), (msg, "run-2")])
    await store.remember_starts([(msg, "run-1"), (msg, "run-2")])
    assert (await store.facts("web:c")).unfinished == ("run-1", "run-2")


@pytest.fixture
def far_from_utc(monkeypatch):  # type: ignore[no-untyped-def]
    """The host's local time zone 5:45 ahead of UTC, for the one test."""
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _utc(at: datetime) -> datetime:
    return at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)  # SQLite gives the stored fields back naive


async def test_every_timestamp_written_is_utc_whatever_the_hosts_time_zone(sessions, far_from_utc):
    store = IngressStore(sessions)
    msg = InboundMessage(id="m", platform="web", chat_id="c", user={"id": "u"}, text="hi")
    await store.record_sightings([("api", "web", "m")])
    await store.set_role("web:new", "smart")
    await store.remember_starts([(msg, "run-1")])  # a row of its own: set_role would stamp it again
    async with sessions() as s:
        stamps = [*(await s.scalars(select(InboundDedupe.received_at))).all()]
        stamps += (await s.scalars(select(IngressConversation.updated_at))).all()
    assert len(stamps) == 3
    now = datetime.now(UTC)
    for at in stamps:
        assert abs(_utc(at) - now) < timedelta(minutes=5), at


async def test_a_remembered_conversation_is_updated_in_place_each_time(sessions):
    store = IngressStore(sessions)
    msg = InboundMessage(id="m", platform="web", chat_id="c", user={"id": "u"}, text="hi")
    await store.remember_starts([(msg, "run-1")])
    async with sessions() as s:
        first = await s.scalar(select(IngressConversation.updated_at))
    await asyncio.sleep(0.01)
    await store.remember_starts([(msg, "run-2")])
    async with sessions() as s:
        rows = (await s.execute(select(IngressConversation.key, IngressConversation.updated_at))).all()
    [(key, updated_at)] = rows
    assert key == "web:c" and first is not None and updated_at > first
