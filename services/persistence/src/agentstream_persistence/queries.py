"""The list queries of the read API and `agentstream runs list`: what each list holds, in which order.

Each list is a `select` (filters only) plus a `Keyset` (order and cursors); `read_page`
joins the two. Filters a caller adds (e.g. `.where(...)`) keep the order and the cursors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import AwareDatetime
from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agentstream.auth import DEFAULT_TENANT, Principal
from agentstream.db import Message, Run
from agentstream_persistence.pages import NO_TIME, Key, Keyset

# started_at never changes once stored (a resumed run keeps it); finished_at takes the newest ending.
RUN_START = func.coalesce(Run.started_at, Run.finished_at, NO_TIME)
RUN_ENDING = func.coalesce(Run.finished_at, Run.started_at, NO_TIME)

# A conversation's runs, oldest start first.
CONVERSATION_RUNS = Keyset("conversation-runs", (RUN_START, Run.run_id), (AwareDatetime, str))
# Runs of a conversation are sequential: by run start, then by stream position ((root, seq, part) is unique).
CONVERSATION_MESSAGES = Keyset(
    "conversation-messages", (RUN_START, Message.root_run_id, Message.seq, Message.part), (AwareDatetime, str, int, int)
)
# All runs, newest ending first: what an operator looks for (a resumed run moves up when it ends again).
RUNS = Keyset("runs", (RUN_ENDING, Run.run_id), (AwareDatetime, str), descending=True)


def visible_to(query: Select[Any], principal: Principal) -> Select[Any]:
    """Only the principal's tenant (rows without one are the default tenant's); a credential pinned to
    an end user sees only that user's runs. Messages are filtered through their run."""
    if not principal.all_tenants:
        query = query.where(func.coalesce(Run.tenant_id, DEFAULT_TENANT) == principal.tenant_id)
    if principal.user_id is not None:
        query = query.where(Run.user_id == principal.user_id)
    return query


def may_see(run: Run | None, principal: Principal) -> bool:
    return (
        run is not None
        and principal.sees_tenant(run.tenant_id)
        and (principal.user_id is None or run.user_id == principal.user_id)
    )


def conversation_runs(key: str) -> Select[Any]:
    return select(Run).where(Run.conversation_key == key)


def conversation_messages(key: str) -> Select[Any]:
    # Outer join: a message whose run row is missing still lists (its run start counts as NO_TIME).
    return select(Message).outerjoin(Run, Run.run_id == Message.root_run_id).where(Message.conversation_key == key)


def runs(*, statuses: Sequence[str] = (), conversation: str | None = None) -> Select[Any]:
    query = select(Run)
    if statuses:
        query = query.where(Run.status.in_(statuses))
    if conversation is not None:
        query = query.where(Run.conversation_key == conversation)
    return query


async def read_page(
    session: AsyncSession, keyset: Keyset, query: Select[Any], after: Key | None, limit: int
) -> tuple[list[tuple[Any, ...]], str | None]:
    """Up to `limit` rows of `query` past `after` in `keyset`'s order, and the next page's cursor."""
    rows = (await session.execute(keyset.page(query, after, limit))).all()
    return keyset.split(rows, limit)
