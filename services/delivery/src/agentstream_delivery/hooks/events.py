"""Lifecycle points and the pure mapping from topic records to them.

A `HookEvent` is what every observer hook receives: the lifecycle point
(`agent:start`, `agent:step`, `agent:end`, `delivery:sent`, `session:start|end|reset`,
`command:<name>`), the conversation and run it belongs to, and a JSON-able payload.
The mapping is a pure function of the record plus a small session memory, so it is
unit-tested without Kafka.
"""

from __future__ import annotations

from collections import OrderedDict
from fnmatch import fnmatchcase
from typing import assert_never

from agentstream.contracts import (
    DeliveryReceipt,
    LedgerState,
    Notice,
    RunEvent,
    RunFinished,
    RunStarted,
    StepCompleted,
    StepFailed,
)
from agentstream.contracts import events as run_events
from agentstream.contracts.hook_events import (
    AgentEndData,
    AgentStartData,
    AgentStepData,
    AgentStepFailedData,
    CommandData,
    DeliverySentData,
    HookData,
    HookEvent,
    HookPoint,
    SessionData,
    command_point,
)

__all__ = ["POINTS", "HookEvent", "LifecycleMapper", "matches"]

POINTS = tuple(HookPoint)
RESET_COMMANDS = frozenset({"new", "reset"})


def matches(patterns: list[str] | tuple[str, ...], point: str) -> bool:
    """Glob match of a lifecycle point: `*`, `agent:*`, `command:new`."""
    return any(fnmatchcase(point, p) for p in patterns)


class LifecycleMapper:
    """Turns `events` and `deliveries` records into lifecycle events.

    Sessions are inferred from `run.started`: a session id the conversation has not
    shown before starts a session (and ends the one seen before it). The memory is
    bounded and per process, so after a restart a conversation's first run announces
    its session again: `session:start` is at-least-once per session id.
    """

    def __init__(self, max_conversations: int = 10_000) -> None:
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._max = max_conversations

    def map(self, record: RunEvent | DeliveryReceipt) -> list[HookEvent]:
        match record:
            case DeliveryReceipt(state=LedgerState.SENT):
                return [self._receipt(record)]
            case RunStarted() if record.run_id == record.root_run_id:
                return [
                    *self._session_change(record),
                    self._run(
                        record,
                        HookPoint.AGENT_START,
                        AgentStartData(
                            assistant_id=record.assistant_id,
                            connector_id=record.connector_id,
                            user_id=record.user_id,
                            tenant_id=record.tenant_id,
                            session_id=record.session_id,
                            reply_target=record.reply_target,
                        ),
                    ),
                ]
            case StepCompleted():
                step = AgentStepData(step_id=record.step_id, step_type=record.step_type, ok=True, depth=record.depth)
                return [self._run(record, HookPoint.AGENT_STEP, step)]
            case StepFailed():
                failed = AgentStepFailedData(
                    step_id=record.step_id, step_type=record.step_type, ok=False, depth=record.depth, error=record.error
                )
                return [self._run(record, HookPoint.AGENT_STEP, failed)]
            case RunFinished():
                end = AgentEndData(
                    status=record.status,
                    error=record.error,
                    reason=record.reason,
                    usage=record.usage,
                    duration_ms=record.duration_ms,
                )
                return [self._run(record, HookPoint.AGENT_END, end)]
            case Notice(command=str(command)):
                return self._command(record, command)
            case DeliveryReceipt() | RunStarted() | Notice():
                return []  # a call not (yet) sent, a sub-agent's start, a notice answering no command
            case (
                run_events.RunQueued()
                | run_events.MessageStarted()
                | run_events.MessageDelta()
                | run_events.MessageCompleted()
                | run_events.ToolCall()
                | run_events.ToolResult()
                | run_events.SegmentBreak()
                | run_events.StepStarted()
                | run_events.RunHeartbeat()
                | run_events.ToolHeartbeat()
            ):
                return []  # no lifecycle point: a hook sees a step once it ended, the text once delivered
            case unexpected:
                assert_never(unexpected)

    def _session_change(self, ev: RunStarted) -> list[HookEvent]:
        if ev.session_id is None:
            return []
        previous = self._sessions.get(ev.conversation_key)
        if previous == ev.session_id:
            self._sessions.move_to_end(ev.conversation_key)
            return []
        self._remember(ev.conversation_key, ev.session_id)
        out = []
        if previous is not None:
            out.append(self._run(ev, HookPoint.SESSION_END, SessionData(session_id=previous)))
        out.append(self._run(ev, HookPoint.SESSION_START, SessionData(session_id=ev.session_id)))
        return out

    def _command(self, ev: Notice, command: str) -> list[HookEvent]:
        name = command.lstrip("/").lower()
        out = [self._run(ev, command_point(name), CommandData(command=name, text=ev.text, level=ev.level))]
        if name in RESET_COMMANDS:
            previous = self._sessions.pop(ev.conversation_key, None)
            out.append(self._run(ev, HookPoint.SESSION_RESET, SessionData(session_id=previous)))
        return out

    def _remember(self, key: str, session_id: str) -> None:
        self._sessions[key] = session_id
        self._sessions.move_to_end(key)
        while len(self._sessions) > self._max:
            self._sessions.popitem(last=False)

    @staticmethod
    def _run(ev: RunEvent, point: str, data: HookData) -> HookEvent:
        return HookEvent(
            point=point,
            event_id=ev.id,
            conversation_key=ev.conversation_key,
            root_run_id=ev.root_run_id,
            run_id=ev.run_id,
            ts=ev.ts,
            data=data,
        )

    @staticmethod
    def _receipt(r: DeliveryReceipt) -> HookEvent:
        return HookEvent(
            point=HookPoint.DELIVERY_SENT,
            event_id=r.id,
            conversation_key=r.conversation_key,
            root_run_id=r.root_run_id,
            ts=r.ts,
            data=DeliverySentData(
                platform=r.platform,
                chat_id=r.chat_id,
                segment=r.segment,
                platform_message_id=r.platform_message_id,
                text_length=r.text_length,
                final=r.final,
            ),
        )
