"""The `audit` observer: an append-only log of lifecycle events in `audit_log`.

Rows are only ever inserted. (event_id, point) is unique, so replaying the topic
after a crash adds nothing.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from agentstream.db.models_delivery import AuditLog
from agentstream_delivery.hooks.base import ObserverHook, SessionSource
from agentstream_delivery.hooks.events import HookEvent


class AuditHook:
    def __init__(self, sessions: SessionSource, points: list[str] | None = None) -> None:
        self.sessions = sessions
        self.points = tuple(points or ["*"])

    def as_observer(self) -> ObserverHook:
        return ObserverHook("audit", self, points=self.points, durable=True)

    async def __call__(self, event: HookEvent) -> None:
        async with self.sessions() as session:
            exists = await session.scalar(
                select(AuditLog.id).where(AuditLog.event_id == event.event_id, AuditLog.point == event.point)
            )
            if exists is not None:
                return
            session.add(
                AuditLog(
                    event_id=event.event_id,
                    point=event.point,
                    conversation_key=event.conversation_key,
                    root_run_id=event.root_run_id,
                    data=event.model_dump(mode="json")["data"],
                    at=event.ts,
                )
            )
            try:
                await session.commit()
            except IntegrityError:
                await session.rollback()
