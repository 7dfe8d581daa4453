"""The `billing` observer: usage per tenant, user and assistant into the `usage` table.

`agent:start` says who ran what (user, tenant, assistant, connector); `agent:end`
carries the summed usage. One row per root run, inserted only if absent, so a replay
of the topic (at-least-once) bills nothing twice.
"""

from __future__ import annotations

from collections import OrderedDict

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from agentstream.contracts.hook_events import AgentEndData, AgentStartData, HookEvent, HookPoint
from agentstream.db.models_delivery import Usage
from agentstream_delivery.hooks.base import ObserverHook, SessionSource


class BillingHook:
    def __init__(self, sessions: SessionSource, max_open_runs: int = 10_000) -> None:
        self.sessions = sessions
        self._identity: OrderedDict[str, AgentStartData] = OrderedDict()  # root run → who ran it
        self._max = max_open_runs

    def as_observer(self) -> ObserverHook:
        return ObserverHook("billing", self, points=(HookPoint.AGENT_START, HookPoint.AGENT_END), durable=True)

    async def __call__(self, event: HookEvent) -> None:
        if event.root_run_id is None:
            return
        match event.data:
            case AgentStartData() as who:
                self._identity[event.root_run_id] = who
                while len(self._identity) > self._max:
                    self._identity.popitem(last=False)
            case AgentEndData() as end:
                await self._record(event, event.root_run_id, end, self._identity.pop(event.root_run_id, None))
            case _:
                pass  # not a point billing observes

    async def _record(self, event: HookEvent, root_run_id: str, end: AgentEndData, who: AgentStartData | None) -> None:
        usage = end.usage
        async with self.sessions() as session:
            if await session.scalar(select(Usage.root_run_id).where(Usage.root_run_id == event.root_run_id)):
                return  # already billed (replay)
            session.add(
                Usage(
                    root_run_id=root_run_id,
                    conversation_key=event.conversation_key,
                    tenant_id=who.tenant_id if who else None,
                    user_id=who.user_id if who else None,
                    assistant_id=who.assistant_id if who else None,
                    connector_id=who.connector_id if who else None,
                    status=str(end.status),
                    prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens,
                    llm_calls=usage.llm_calls,
                    duration_ms=end.duration_ms,
                    finished_at=event.ts,
                )
            )
            try:
                await session.commit()
            except IntegrityError:  # a concurrent writer (another replica) billed it first
                await session.rollback()
