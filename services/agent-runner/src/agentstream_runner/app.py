"""agent-runner service: routes each record of `runs` + `tool-results` to its owner.

The handler never waits for a run: StartRun goes to the conversation's owner,
InterruptRun cancels its active run, a ToolCallResult resolves the waiting call.
The service itself is the pipeline's `RunPorts` (publish events, call tools).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Gauge

from agentstream.contracts import (
    EventBase,
    InterruptRun,
    ResetConversation,
    ResumeRun,
    StartRun,
    ToolCallRequest,
    ToolCallResult,
)
from agentstream.service import Service
from agentstream_runner.assistants import Assistants
from agentstream_runner.connectors import Connectors
from agentstream_runner.context import RunContext, RunControl
from agentstream_runner.conversation import SHUTDOWN, Conversations
from agentstream_runner.pipeline import run_pipeline
from agentstream_runner.records import Undecodable, decode_record
from agentstream_runner.waiters import ToolWaiters


class AgentRunnerService(Service):
    name = "agent-runner"

    def setup(self) -> None:
        self.assistants = Assistants(self.settings)  # assistants_dir: later issue, see assistants.py
        self.connectors = Connectors(self.settings)
        self.waiters = ToolWaiters()
        self.conversations = Conversations(self._run, log=self.log)
        self.records = Counter(
            "agentstream_runner_records_total", "Records consumed by type", ["type"], registry=self.registry
        )
        Gauge(
            "agentstream_runner_active_conversations", "Conversations with an active run", registry=self.registry
        ).set_function(lambda: len(self.conversations))
        # One subscription for both topics: they are co-partitioned, so a conversation's
        # commands and tool results reach the same runner, in order.
        self.broker.subscriber(self.topics.runs, self.topics.tool_results, **self.subscriber_options())(
            self.on_record
        )
        if self.settings.assistants_dir:
            self.log.warning("assistants_dir is not loaded yet; only the built-in default assistant exists")

    async def on_record(self, msg: KafkaMessage) -> None:
        record = decode_record(bytes(msg.body))
        self.records.labels(getattr(record, "type", "undecodable")).inc()
        match record:
            case Undecodable(reason=reason):
                await self.dead_letter(msg, reason)
            case StartRun():
                self.conversations.submit(record)
            case InterruptRun(conversation_key=key, run_id=run_id, reason=reason):
                if not self.conversations.interrupt(key, run_id, reason):
                    self.log.info("interrupt ignored: no matching active run", conversation=key, run_id=run_id)
            case ResumeRun() | ResetConversation():
                self.log.info("not implemented yet", type=record.type, conversation=record.conversation_key)
            case ToolCallResult():
                if not self.waiters.resolve(record):
                    self.log.info("tool result ignored: no run waits for it", run_id=record.run_id,
                                  call_id=record.call_id)

    def _run(self, start: StartRun, control: RunControl) -> Coroutine[Any, Any, None]:
        ctx = RunContext(
            ports=self, connectors=self.connectors, assistants=self.assistants, runner=self.settings.runner,
            control=control,
        )
        return run_pipeline(ctx, start)

    # -- RunPorts ------------------------------------------------------------------
    async def publish_event(self, event: EventBase) -> None:
        await self.publish(self.topics.events, event, event.conversation_key)

    async def call_tool(self, request: ToolCallRequest) -> ToolCallResult:
        result = self.waiters.expect(request.run_id, request.call_id)  # before publishing: no lost result
        try:
            await self.publish(self.topics.tool_calls, request, request.conversation_key)
            return await result
        finally:
            self.waiters.discard(request.run_id, request.call_id)

    # -- lifecycle -----------------------------------------------------------------
    async def stop(self) -> None:
        # Runs end (interrupted, reason "shutdown") while the broker can still publish run.finished.
        await self.conversations.close(SHUTDOWN)
        await super().stop()
