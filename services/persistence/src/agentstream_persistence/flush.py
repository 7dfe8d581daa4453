"""The single flush: one transaction per finished run, safe to repeat.

Inserts skip rows that already exist (`ON CONFLICT DO NOTHING` on SQLite and
PostgreSQL alike), so a re-delivered stream writes nothing twice.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import case, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream.db import Conversation, Message, Run
from agentstream_persistence.rows import FlushRows

MESSAGE_KEY = ["root_run_id", "seq", "part"]


def _insert(session: AsyncSession, table: Any) -> Any:
    dialect = session.bind.dialect.name if session.bind is not None else "sqlite"
    return (postgresql if dialect == "postgresql" else sqlite).insert(table)


async def write_run(sessions: async_sessionmaker[AsyncSession], rows: FlushRows) -> None:
    async with sessions() as session, session.begin():
        await session.execute(_insert(session, Run).values(rows.run).on_conflict_do_nothing(index_elements=["run_id"]))
        if rows.messages:
            await session.execute(_insert(session, Message).on_conflict_do_nothing(index_elements=MESSAGE_KEY),
                                  rows.messages)
        conv = _insert(session, Conversation).values(rows.conversation)
        # A re-flushed older run must not move the conversation back in time.
        newer = conv.excluded.updated_at > Conversation.updated_at
        await session.execute(conv.on_conflict_do_update(index_elements=["key"], set_={
            "updated_at": case((newer, conv.excluded.updated_at), else_=Conversation.updated_at),
            "session_id": case((newer, func.coalesce(conv.excluded.session_id, Conversation.session_id)),
                               else_=Conversation.session_id),
        }))
