"""The ingress tables: dedupe and what ingress remembers per conversation (for slash commands)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime

from sqlalchemy import select, text, tuple_
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from agentstream.config.ingress import PairingSettings
from agentstream.contracts import InboundMessage, RunStatus
from agentstream.contracts.inbound import DedupeKey
from agentstream.db import Run
from agentstream.db.models_ingress import InboundDedupe, IngressConversation
from agentstream.db.session import autocommitting
from agentstream_ingress.commands import ConversationFacts, RunSummary
from agentstream_ingress.pairing import Issue
from agentstream_ingress.pairing_store import PairingStore

PENDING_KEPT = 20  # runs remembered per conversation for /status and /stop
RESUMABLE = (RunStatus.FAILED.value, RunStatus.INTERRUPTED.value)
# PostgreSQL: the whole batch as one JSON parameter ([[source, platform, id], ...]). One
# short statement whatever the batch size, so the driver parses it once (a multi-row VALUES
# clause is re-parsed per batch); JSON, not arrays: psycopg typed an array parameter by
# looking at every element, twice the cost of the statement.
DEDUPE = InboundDedupe.__tablename__
IDENTS_PG = "(SELECT r->>0 AS s, r->>1 AS p, r->>2 AS m FROM json_array_elements(CAST(:idents AS json)) AS r) AS t"
SEEN_PG = text(
    f"SELECT d.source, d.platform, d.message_id FROM {DEDUPE} d JOIN {IDENTS_PG} ON d.source = t.s"
    " AND d.platform = t.p AND d.message_id = t.m"
)
RECORD_PG = text(
    f"INSERT INTO {DEDUPE} (source, platform, message_id, received_at) SELECT s, p, m, :now"
    f" FROM {IDENTS_PG} ON CONFLICT DO NOTHING"
)
CONVERSATIONS = IngressConversation.__tablename__
KEYS_PG = "(SELECT json_array_elements_text(CAST(:keys AS json)))"
ROLES_PG = text(f"SELECT key, connector_role FROM {CONVERSATIONS} WHERE key IN {KEYS_PG}")
PENDING_PG = text(f"SELECT key, pending_runs FROM {CONVERSATIONS} WHERE key IN {KEYS_PG}")
# The rows as one JSON array of {"k", "m", "p"} (JSON values in a text[] array would be
# escaped character by character on the way).
REMEMBER_PG = text(
    f"INSERT INTO {CONVERSATIONS} (key, last_message, pending_runs, updated_at)"
    " SELECT r->>'k', r->'m', r->'p', :now FROM json_array_elements(CAST(:rows AS json)) AS r"
    " ON CONFLICT (key) DO UPDATE SET last_message = excluded.last_message,"
    " pending_runs = excluded.pending_runs, updated_at = excluded.updated_at"
)


def _pending_after(pending: Sequence[str], started: Sequence[str]) -> list[str]:
    """The pending run ids once `started` are added: a re-read batch's runs (same derived
    ids, starting.py) are not counted twice."""
    return list(dict.fromkeys([*pending, *started]))[-PENDING_KEPT:]


class IngressStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions
        # The batch path's statements each stand alone (a read, one upsert): outside a
        # transaction, a round trip each instead of three (`autocommitting`).
        self.single = autocommitting(sessions)
        self._claimed: set[DedupeKey] = set()  # first sightings whose batch output is not acked yet
        self._taken: list[DedupeKey] = []

    async def first_sightings(self, idents: Sequence[DedupeKey]) -> set[DedupeKey]:
        """Those (source, platform, id) neither recorded nor claimed by a batch still in flight; they
        are claimed now (in memory) until `record_sightings` or `release_sightings`.

        Recorded only once the batch's output is in Kafka: a batch whose output failed, or
        that a crash cut short, is read again and decided again instead of being dropped as
        a duplicate of itself (a crash between the acks and the record repeats it at worst).
        """
        unique = [i for i in dict.fromkeys(idents) if i not in self._claimed]
        if not unique:
            return set()
        async with self.single() as s:
            conn = await s.connection()
            if conn.dialect.name == "postgresql":
                rows = (await conn.execute(SEEN_PG, {"idents": json.dumps(unique)})).all()
            else:
                rows = (
                    await conn.execute(
                        select(InboundDedupe.source, InboundDedupe.platform, InboundDedupe.message_id).where(
                            tuple_(InboundDedupe.source, InboundDedupe.platform, InboundDedupe.message_id).in_(unique)
                        )
                    )
                ).all()
        fresh = set(unique) - {(row[0], row[1], row[2]) for row in rows}
        self._claimed |= fresh
        self._taken.extend(fresh)
        return fresh

    def take_claims(self) -> list[DedupeKey]:
        """The idents claimed since the last call (by the batch just decided)."""
        taken, self._taken = self._taken, []
        return taken

    async def record_sightings(self, idents: Sequence[DedupeKey]) -> None:
        """The claimed idents' output is in Kafka: from now on they are duplicates, for good."""
        if idents:
            now = datetime.now(UTC)
            async with self.single() as s, s.begin():
                conn = await s.connection()
                if conn.dialect.name == "postgresql":
                    await conn.execute(RECORD_PG, {"now": now, "idents": json.dumps(idents)})
                else:  # SQLite: one cached statement over a parameter list (SQLAlchemy batches it)
                    await conn.execute(
                        sqlite_insert(InboundDedupe).on_conflict_do_nothing(),
                        [{"source": s, "platform": p, "message_id": m, "received_at": now} for s, p, m in idents],
                    )
        self.release_sightings(idents)

    def release_sightings(self, idents: Sequence[DedupeKey]) -> None:
        """Their batch's output failed: not seen, so the re-read decides them again."""
        self._claimed.difference_update(idents)

    async def role_overrides(self, keys: Collection[str]) -> dict[str, str | None]:
        if not keys:
            return {}
        async with self.single() as s:
            conn = await s.connection()
            if conn.dialect.name == "postgresql":  # one array parameter: the same statement for any batch
                rows = await conn.execute(ROLES_PG, {"keys": json.dumps(list(keys))})
            else:
                rows = await conn.execute(
                    select(IngressConversation.key, IngressConversation.connector_role).where(
                        IngressConversation.key.in_(list(keys))
                    )
                )
            return {key: role for key, role in rows.all()}

    async def facts(self, key: str) -> ConversationFacts:
        async with self.sessions() as s:
            row = await s.get(IngressConversation, key)
            pending = list((row.pending_runs or {}).get("run_ids", [])) if row else []
            finished = set(await s.scalars(select(Run.run_id).where(Run.run_id.in_(pending)))) if pending else set()
            resumable = (
                await s.execute(
                    select(Run.run_id, Run.status)
                    .where(Run.conversation_key == key, Run.parent_run_id.is_(None), Run.status.in_(RESUMABLE))
                    .order_by(Run.finished_at.desc())
                    .limit(1)
                )
            ).first()
            last = (
                await s.execute(
                    select(Run.run_id, Run.status)
                    .where(Run.conversation_key == key, Run.parent_run_id.is_(None))
                    .order_by(Run.finished_at.desc())
                    .limit(1)
                )
            ).first()
        last_message = InboundMessage.model_validate(row.last_message) if row and row.last_message else None
        return ConversationFacts(
            role_override=row.connector_role if row else None,
            last_message=last_message,
            unfinished=tuple(r for r in pending if r not in finished),
            resumable=RunSummary(*resumable) if resumable else None,
            last_finished=RunSummary(*last) if last else None,
        )

    async def remember_starts(self, started: Sequence[tuple[InboundMessage, str]]) -> None:
        """The last message per conversation is what /retry repeats; started runs are
        pending until they show up in `runs`."""
        per_key: dict[str, tuple[InboundMessage, list[str]]] = {}
        for msg, run_id in started:  # one row per conversation, however many runs it got
            key = msg.conversation_key
            run_ids = per_key[key][1] if key in per_key else []
            run_ids.append(run_id)
            per_key[key] = (msg, run_ids)
        # Core, not the ORM: one SELECT and one multi-row upsert per batch (the ORM's unit
        # of work cost more CPU than everything else ingress does for a batch). No transaction
        # around them: it would lock nothing the upsert relies on (batches are remembered one
        # after the other, pipeline.py, and a conversation has one ingress at a time).
        async with self.single() as s, s.begin():
            conn = await s.connection()
            if conn.dialect.name == "postgresql":
                await self._remember_pg(conn, per_key)
            else:
                await self._remember_core(conn, per_key)

    @staticmethod
    async def _remember_pg(conn: AsyncConnection, per_key: dict[str, tuple[InboundMessage, list[str]]]) -> None:
        keys = list(per_key)
        pending = {
            key: (runs or {}).get("run_ids", [])
            for key, runs in (await conn.execute(PENDING_PG, {"keys": json.dumps(keys)})).all()
        }
        rows = ",".join(  # each piece is valid JSON: the message serialized by pydantic, the rest by json
            f'{{"k":{json.dumps(key)},"m":{last.model_dump_json()},'
            f'"p":{json.dumps({"run_ids": _pending_after(pending.get(key, []), run_ids)})}}}'
            for key, (last, run_ids) in per_key.items()
        )
        await conn.execute(REMEMBER_PG, {"now": datetime.now(UTC), "rows": f"[{rows}]"})

    @staticmethod
    async def _remember_core(conn: AsyncConnection, per_key: dict[str, tuple[InboundMessage, list[str]]]) -> None:
        table = IngressConversation.__table__
        pending = {
            key: (runs or {}).get("run_ids", [])
            for key, runs in (
                await conn.execute(select(table.c.key, table.c.pending_runs).where(table.c.key.in_(list(per_key))))
            ).all()
        }
        now = datetime.now(UTC)
        rows = [
            {
                "key": key,
                "connector_role": None,
                "last_message": last.model_dump(mode="json"),
                "pending_runs": {"run_ids": _pending_after(pending.get(key, []), run_ids)},
                "updated_at": now,
            }
            for key, (last, run_ids) in per_key.items()
        ]
        stmt = sqlite_insert(IngressConversation)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[table.c.key],
                set_={
                    "last_message": stmt.excluded.last_message,
                    "pending_runs": stmt.excluded.pending_runs,
                    "updated_at": stmt.excluded.updated_at,
                },
            ),
            rows,
        )

    async def set_role(self, key: str, role: str | None) -> None:
        async with self.sessions() as s, s.begin():
            row = await self._row(s, key)
            row.connector_role = role
            row.updated_at = datetime.now(UTC)

    @staticmethod
    def _new_row(key: str) -> IngressConversation:
        return IngressConversation(
            key=key, connector_role=None, last_message=None, pending_runs=None, updated_at=datetime.now(UTC)
        )

    async def _row(self, s: AsyncSession, key: str) -> IngressConversation:
        row = await s.get(IngressConversation, key)
        if row is None:
            row = self._new_row(key)
            s.add(row)
        return row


class DatabasePorts(IngressStore):
    """Everything the pipeline reads and records, on one database."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], pairing: PairingSettings) -> None:
        super().__init__(sessions)
        self.pairing = PairingStore(sessions, pairing)

    async def is_paired(self, platform: str, user_id: str) -> bool:
        return await self.pairing.is_paired(platform, user_id)

    async def issue_pairing(self, platform: str, user_id: str, chat_id: str) -> Issue:
        return await self.pairing.issue(platform, user_id, chat_id)
