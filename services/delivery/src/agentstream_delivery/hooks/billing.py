"""The `billing` observer: usage per tenant, user and assistant into the `usage` table.

`agent:start` says who ran what (user, tenant, assistant, connector); `agent:end`
carries the summed usage. One row per root run, inserted only if absent, so a replay
of the topic (at-least-once) bills nothing twice.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from agentstream.db.models_delivery import Usage
from agentstream_delivery.hooks.base import ObserverHook, SessionSource
from agentstream_delivery.hooks.events import HookEvent

_IDENTITY_KEYS = ("user_id", "tenant_id", "assistant_id", "connector_id")


class BillingHook:
    def __init__(self, sessions: SessionSource, max_open_runs: int = 10_000) -> None:
        self.sessions = sessions
        self._identity: OrderedDict[str, dict[str, Any]] = OrderedDict()  # root run → who ran it
        self._max = max_open_runs

    def as_observer(self) -> ObserverHook:
        return ObserverHook("billing", self, points=("agent:start", "agent:end"), durable=True)

    async def __call__(self, event: HookEvent) -> None:
        if event.root_run_id is None:
            return
        if event.point == "agent:start":
            self._identity[event.root_run_id] = {k: event.data.get(k) for k in _IDENTITY_KEYS}
            while len(self._identity) > self._max:
                self._identity.popitem(last=False)
        elif event.point == "agent:end":
            await self._record(event, self._identity.pop(event.root_run_id, {}))

    async def _record(self, event: HookEvent, who: dict[str, Any]) -> None:
        usage = event.data.get("usage") or {}
        async with self.sessions() as session:
            if await session.scalar(select(Usage.root_run_id).where(Usage.root_run_id == event.root_run_id)):
                return  # already billed (replay)
            session.add(
                Usage(
                    root_run_id=event.root_run_id,
                    conversation_key=event.conversation_key,
                    tenant_id=who.get("tenant_id"),
                    user_id=who.get("user_id"),
                    assistant_id=who.get("assistant_id"),
                    connector_id=who.get("connector_id"),
                    status=str(event.data.get("status", "")),
                    prompt_tokens=int(usage.get("prompt_tokens", 0)),
                    completion_tokens=int(usage.get("completion_tokens", 0)),
                    llm_calls=int(usage.get("llm_calls", 0)),
                    duration_ms=float(event.data.get("duration_ms", 0.0)),
                    finished_at=event.ts,
                )
            )
            try:
                await session.commit()
            except IntegrityError:  # a concurrent writer (another replica) billed it first
                await session.rollback()
