"""The front door's outbox (agentstream_ingress.outbox) on SQLite and PostgreSQL, and the
`agentstream-resent-from` header a re-sent record carries."""

from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import ConsumerRecord
from sqlalchemy import select, update

from agentstream.contracts import InboundMessage
from agentstream.db import Run, create_engine, session_factory, upgrade
from agentstream.db.models_ingress import InboundDedupe, InboundOutbox
from agentstream_ingress.outbox import RESENT_FROM, Outbox, position_of, resent_from, resent_header
from agentstream_ingress.store import IngressStore


@pytest.fixture
async def sessions(db_url):  # type: ignore[no-untyped-def]
    await upgrade(db_url)
    engine = create_engine(db_url)
    yield session_factory(engine)
    await engine.dispose()


def message(n: int, text: str = "hi") -> InboundMessage:
    return InboundMessage(id=f"m-{n}", platform="web", chat_id=f"c-{n}", user={"id": "u"}, text=text, source="api:k")


def record(headers: list[tuple[str, bytes | None]], partition: int = 2, offset: int = 40) -> ConsumerRecord:  # type: ignore[type-arg]
    return ConsumerRecord("inbound", partition, offset, 0, 0, b"k", b"{}", None, 1, 2, headers)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"3:17", (3, 17)),
        (b"0:0", (0, 0)),
        (b"3", None),
        (b"-1:5", None),
        (b"a:b", None),
        (b"3:", None),
        (b"\xff:1", None),
        (None, None),
    ],
)
def test_resent_from_reads_only_a_well_formed_header(value, expected):
    assert resent_from([("traceparent", b"00-x"), (RESENT_FROM, value)]) == expected
    assert resent_from([]) is None and resent_from(None) is None


def test_a_resent_record_derives_from_where_it_first_landed():
    assert position_of(record([resent_header((1, 9))])) == (1, 9)
    assert position_of(record([("type", b"inbound.message")])) == (2, 40)
    assert resent_header((1, 9)) == (RESENT_FROM, b"1:9")


async def finish(sessions, run_id: str) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as s, s.begin():
        s.add(
            Run(
                run_id=run_id,
                root_run_id=run_id,
                conversation_key="web:c",
                status="completed",
                text="",
                prompt_tokens=0,
                completion_tokens=0,
                llm_calls=0,
                duration_ms=0.0,
                finished_at=datetime.now(UTC),
            )
        )


async def test_a_row_waits_until_its_run_ends_or_it_is_decided_as_no_run(sessions):
    outbox = Outbox(sessions)
    never, started, notice, done = (message(n) for n in range(4))
    for msg in (never, started, notice, done):
        await outbox.accepting(msg)
    await outbox.accepting(message(0, text="a retry keeps the first"))
    await outbox.decided(
        [(started.dedupe_key, (1, 5), "run-started"), (done.dedupe_key, (0, 7), "run-done")], {notice.dedupe_key}
    )
    await finish(sessions, "run-done")
    dedupe = IngressStore(sessions)
    await dedupe.first_sightings([started.dedupe_key, done.dedupe_key])
    await dedupe.record_sightings(dedupe.take_claims())

    unfinished = await outbox.unfinished()
    assert sorted((u.message.id, u.first) for u in unfinished) == [("m-0", None), ("m-1", (1, 5))]
    assert next(u.message for u in unfinished if u.first is None) == never
    # decided again when it comes back: its dedupe row is gone, the finished run's is kept
    assert await IngressStore(sessions).first_sightings([started.dedupe_key, done.dedupe_key]) == {started.dedupe_key}

    await finish(sessions, "run-started")
    await outbox.sweep()
    async with sessions() as s:
        assert (await s.execute(select(InboundOutbox.message_id))).scalars().all() == ["m-0"]
        assert (await s.execute(select(InboundDedupe.message_id))).scalars().all() == ["m-3"]


async def test_an_undecided_row_is_dropped_after_an_hour(sessions):
    outbox = Outbox(sessions)
    await outbox.accepting(message(1))
    await outbox.accepting(message(2))
    async with sessions() as s, s.begin():
        old = datetime.now(UTC) - timedelta(hours=1, minutes=1)
        await s.execute(update(InboundOutbox).where(InboundOutbox.message_id == "m-1").values(accepted_at=old))
    await outbox.sweep()
    assert [u.message.id for u in await outbox.unfinished()] == ["m-2"]
