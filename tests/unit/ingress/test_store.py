"""The ingress tables on SQLite and PostgreSQL: dedupe, pairing, conversation memory."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text

from agentstream.config.ingress import PairingSettings
from agentstream.contracts import InboundMessage
from agentstream.db import Run, create_engine, session_factory, upgrade
from agentstream.db.models_ingress import PairingCode
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
