"""The ingress tables: dedupe (step 2) and what ingress remembers per conversation (step 7)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.config.ingress import PairingSettings
from agentstream.contracts import InboundMessage
from agentstream.db import Run
from agentstream.db.models_ingress import InboundDedupe, IngressConversation
from agentstream_ingress.commands import ConversationFacts, RunSummary
from agentstream_ingress.pairing import Issue
from agentstream_ingress.pairing_store import PairingStore

PENDING_KEPT = 20  # runs remembered per conversation for /status and /stop
RESUMABLE = ("failed", "interrupted")


class IngressStore:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def first_sightings(self, idents: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Record every (platform, id); returns those not recorded before.

        Committed on its own, before anything else happens: a later failure does not
        release it, so a redelivery after a crash is dropped rather than run twice.
        """
        unique = list(dict.fromkeys(idents))
        if not unique:
            return set()
        now = datetime.now(UTC)
        async with self.sessions() as s, s.begin():
            conn = await s.connection()
            insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
            # RETURNING, not rowcount: drivers disagree on rowcount for ON CONFLICT DO NOTHING.
            # One cached statement run over a parameter list (SQLAlchemy batches it into
            # multi-row INSERTs), instead of compiling a new N-row VALUES clause per batch.
            stmt = insert(InboundDedupe).on_conflict_do_nothing().returning(
                InboundDedupe.platform, InboundDedupe.message_id)
            params = [{"platform": p, "message_id": m, "received_at": now} for p, m in unique]
            rows = (await conn.execute(stmt, params)).all()
            return {(row[0], row[1]) for row in rows}

    async def role_overrides(self, keys: Collection[str]) -> dict[str, str | None]:
        if not keys:
            return {}
        async with self.sessions() as s:
            rows = await s.execute(select(IngressConversation.key, IngressConversation.connector_role)
                                   .where(IngressConversation.key.in_(list(keys))))
            return {key: role for key, role in rows.all()}

    async def facts(self, key: str) -> ConversationFacts:
        async with self.sessions() as s:
            row = await s.get(IngressConversation, key)
            pending = list((row.pending_runs or {}).get("run_ids", [])) if row else []
            finished = set(await s.scalars(select(Run.run_id).where(Run.run_id.in_(pending)))) if pending else set()
            resumable = (await s.execute(
                select(Run.run_id, Run.status, Run.assistant_id, Run.connector_id)
                .where(Run.conversation_key == key, Run.parent_run_id.is_(None), Run.status.in_(RESUMABLE))
                .order_by(Run.finished_at.desc()).limit(1))).first()
            last = (await s.execute(
                select(Run.run_id, Run.status, Run.assistant_id, Run.connector_id)
                .where(Run.conversation_key == key, Run.parent_run_id.is_(None))
                .order_by(Run.finished_at.desc()).limit(1))).first()
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
        for msg, run_id in started:  # one row update per conversation, however many runs it got
            _, run_ids = per_key.get(msg.conversation_key, (msg, []))
            per_key[msg.conversation_key] = (msg, [*run_ids, run_id])
        async with self.sessions() as s, s.begin():
            rows = {r.key: r for r in await s.scalars(
                select(IngressConversation).where(IngressConversation.key.in_(list(per_key))))}
            now = datetime.now(UTC)
            for key, (last, run_ids) in per_key.items():
                row = rows.get(key)
                if row is None:
                    row = self._new_row(key)
                    s.add(row)
                row.last_message = last.model_dump(mode="json")
                pending = list((row.pending_runs or {}).get("run_ids", []))
                row.pending_runs = {"run_ids": (pending + run_ids)[-PENDING_KEPT:]}
                row.updated_at = now

    async def set_role(self, key: str, role: str | None) -> None:
        async with self.sessions() as s, s.begin():
            row = await self._row(s, key)
            row.connector_role = role
            row.updated_at = datetime.now(UTC)

    @staticmethod
    def _new_row(key: str) -> IngressConversation:
        return IngressConversation(key=key, connector_role=None, last_message=None, pending_runs=None,
                                   updated_at=datetime.now(UTC))

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
