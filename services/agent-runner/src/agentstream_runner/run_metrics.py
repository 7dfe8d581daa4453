"""The runner's metrics, read off the events its runs emit.

Every event of every run leaves through `BrokerRunPorts.publish_event`, which hands it to
`RunMetrics.observe`: runs started and finished, run duration and time to first token, model
calls and tokens (from the `llm` steps), tool calls and retries — with no counter threaded
through the pipeline. Labels are bounded: connector ids and models come from the configuration,
tools the runner knows (any other name the model gives is `unknown`), statuses and reasons the
contracts' enums; never a run, chat or user.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, assert_never

from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from agentstream.contracts import (
    AnyRunEvent,
    Arrival,
    MessageDelta,
    RunFinished,
    RunStarted,
    StepCompleted,
    ToolCallRefusal,
)
from agentstream.contracts import events as ev
from agentstream.contracts.endings import RunStatus
from agentstream.contracts.events import StepType
from agentstream.contracts.steps import LlmStepOutput
from agentstream.metrics.declare import counter, gauge, histogram
from agentstream.tools_catalog import tool_spec

# Runs followed at once; beyond it the oldest is forgotten (a run whose finish was never emitted).
MAX_TRACKED_RUNS = 10_000
NO_REASON = "none"  # `run.finished` without a reason: it simply answered
UNKNOWN = "unknown"  # a run that finished without a `run.started` from this runner
RUN_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
FIRST_TOKEN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)
ARRIVAL_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)


class ArrivalHop(StrEnum):
    """The `hop` label of `agentstream_run_arrival_hop_seconds`: a message's way to its model request."""

    INBOUND_TO_INGRESS = "inbound_to_ingress"  # the inbound record's timestamp → ingress read it
    INGRESS_TO_RUNS = "ingress_to_runs"  # → the `runs` record's timestamp
    RUNS_TO_RUNNER = "runs_to_runner"  # → the runner read it
    RUNNER_TO_MODEL_REQUEST = "runner_to_model_request"  # → the run's first model call began


def arrival_hops(arrival: Arrival, requested_at: float) -> dict[ArrivalHop, float]:
    """The hops `arrival` and the model request time (epoch seconds) tell, each only when both its ends are known."""
    marks = [arrival.produced_at, arrival.ingress_read_at, arrival.runs_produced_at, arrival.runner_read_at]
    marks.append(requested_at)
    return {
        hop: end - start
        for hop, start, end in zip(ArrivalHop, marks, marks[1:], strict=False)
        if start is not None and end is not None
    }


MODEL_LABELS = ("connector", "model")


class CallOutcome(StrEnum):
    """The `outcome` label of the model and tool call counters: `error` is an `llm` step that
    failed (after the connector's own retries), or a tool result that is not ok."""

    OK = "ok"
    ERROR = "error"


class TokenKind(StrEnum):
    """The `kind` label of `agentstream_llm_tokens_total`: which count of the usage a model server reported."""

    PROMPT = "prompt"
    COMPLETION = "completion"


class ServedTools(Protocol):
    """The tools some executor serves now (the runner's `ToolCatalog`)."""

    def executors(self, tool: str) -> set[str]: ...


class _NoExecutors:
    def executors(self, tool: str) -> set[str]:
        return set()


@dataclass
class _Run:
    connector: str
    started_at: float
    first_token: bool = False
    arrival: Arrival | None = None  # until its first model call: then observed and dropped


class RunMetrics:
    def __init__(
        self,
        registry: CollectorRegistry,
        models: Mapping[str, str | None],
        clock: Callable[[], float] = time.monotonic,
        tools: ServedTools | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """`models`: each configured connector id → its model (None: the connector's default);
        `tools`: what the tool labels are bounded by, beside the tools every runner knows."""
        self._models = dict(models)
        self._tools: ServedTools = tools if tools is not None else _NoExecutors()
        self._clock = clock
        self._wall_clock = wall_clock  # `Arrival` times are epoch seconds
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._llm_steps: dict[tuple[str, str], str] = {}  # (run id, step id) → connector
        self.started = counter(
            registry, "agentstream_runs_started_total", "Runs started (root and delegated), by connector", "connector"
        )
        self.finished = counter(
            registry,
            "agentstream_runs_finished_total",
            "Root runs finished, by status and reason (reason `none`: it answered)",
            "status",
            "reason",
        )
        self.duration = histogram(
            registry,
            "agentstream_run_duration_seconds",
            "Root run duration from `run.started` to `run.finished`, by connector",
            "connector",
            buckets=RUN_BUCKETS,
        )
        self.first_token = histogram(
            registry,
            "agentstream_run_first_token_seconds",
            "Time from `run.started` to the run's first streamed text, by connector",
            "connector",
            buckets=FIRST_TOKEN_BUCKETS,
        )
        self.to_model_request = histogram(
            registry,
            "agentstream_run_time_to_model_request_seconds",
            "Time from the inbound record's timestamp to the run's first model call, by connector",
            "connector",
            buckets=ARRIVAL_BUCKETS,
        )
        self.arrival_hops = histogram(
            registry,
            "agentstream_run_arrival_hop_seconds",
            "Each hop of a message's way to its run's first model call (inbound → ingress → runs → runner → model)",
            "hop",
            buckets=ARRIVAL_BUCKETS,
        )
        self._hops = {hop: self.arrival_hops.labels(hop) for hop in ArrivalHop}
        self.llm_calls = counter(
            registry,
            "agentstream_llm_calls_total",
            "Model calls (one `llm` step each, after the connector's own retries), by outcome",
            *MODEL_LABELS,
            "outcome",
        )
        self.llm_tokens = counter(
            registry,
            "agentstream_llm_tokens_total",
            "Tokens the model servers reported, by kind (prompt, completion)",
            *MODEL_LABELS,
            "kind",
        )
        self.llm_retries = counter(
            registry,
            "agentstream_llm_retries_total",
            "Model requests sent again after a transient failure (429, 5xx, timeout), by connector",
            *MODEL_LABELS,
        )
        self.tool_calls = counter(
            registry,
            "agentstream_runner_tool_calls_total",
            "Tool results the runs received, by tool and outcome",
            "tool",
            "outcome",
        )
        self.tool_refusals = counter(
            registry,
            "agentstream_runner_tool_calls_refused_total",
            "Tool calls answered without running, by reason: not_offered (a tool outside the assistant's list, "
            "refused by the runner), the others by an executor (unsigned, bad_signature, not_approved)",
            "reason",
        )
        self.tool_retries = counter(
            registry,
            "agentstream_runner_tool_retries_total",
            "Tool calls asked again after a retryable failure, by tool",
            "tool",
        )
        self.events = counter(
            registry,
            "agentstream_runner_events_total",
            "Events the runs emitted, by type (message.delta per completion token: records per token)",
            "type",
        )
        self._events_by_type: dict[str, Any] = {}  # the `events` child of each type, looked up once
        gauge(registry, "agentstream_runner_active_runs", "Runs started and not yet finished").set_function(
            lambda: len(self._runs)
        )
        # Every series an alert or a panel divides by exists from the start, at zero.
        for connector, model in self._models.items():
            for outcome in CallOutcome:
                self.llm_calls.labels(connector, model or "default", outcome)
            self.llm_retries.labels(connector, model or "default")
            for kind in TokenKind:
                self.llm_tokens.labels(connector, model or "default", kind)
        self.finished.labels(RunStatus.COMPLETED, NO_REASON)
        for refusal in ToolCallRefusal:
            self.tool_refusals.labels(refusal)

    def model_of(self, connector: str) -> str:
        return self._models.get(connector) or "default"

    def llm_retry(self, connector: str) -> None:
        self.llm_retries.labels(connector, self.model_of(connector)).inc()

    def observe(self, event: AnyRunEvent) -> None:
        kind: str = event.type
        counter = self._events_by_type.get(kind)
        if counter is None:
            counter = self._events_by_type[kind] = self.events.labels(kind)
        counter.inc()
        if type(event) is MessageDelta:  # most events: checked before the rest of the match
            self._delta(event)
            return
        # The match below names any event type added to the union later.
        self._follow(event)

    def _follow(self, event: AnyRunEvent) -> None:
        match event:
            case ev.RunStarted():
                self._started(event)
            case ev.MessageDelta():
                self._delta(event)
            case ev.StepStarted(step_type=StepType.LLM):
                connector = str(event.input.get("connector", UNKNOWN))
                self._llm_steps[(event.run_id, event.step_id)] = connector
                self._first_request(event.run_id)
                if len(self._llm_steps) > MAX_TRACKED_RUNS:
                    del self._llm_steps[next(iter(self._llm_steps))]
            case ev.StepCompleted(step_type=StepType.LLM):
                self._llm_completed(event)
            case ev.StepFailed(step_type=StepType.LLM):
                connector = self._llm_steps.pop((event.run_id, event.step_id), UNKNOWN)
                self.llm_calls.labels(connector, self.model_of(connector), CallOutcome.ERROR).inc()
            case ev.ToolCall():
                if event.attempt > 1:
                    self.tool_retries.labels(self.tool_label(event.tool)).inc()
            case ev.ToolResult():
                outcome = CallOutcome.OK if event.ok else CallOutcome.ERROR
                self.tool_calls.labels(self.tool_label(event.tool), outcome).inc()
                if event.refused is not None:
                    self.tool_refusals.labels(event.refused).inc()
            case ev.RunFinished():
                self._finished(event)
            case (
                ev.StepStarted()
                | ev.StepCompleted()
                | ev.StepFailed()
                | ev.RunQueued()
                | ev.MessageStarted()
                | ev.MessageCompleted()
                | ev.SegmentBreak()
                | ev.RunHeartbeat()
                | ev.ToolHeartbeat()
                | ev.Notice()
            ):
                pass  # steps of other types, queueing, messages, heartbeats and notices: not counted
            case _:
                assert_never(event)

    def tool_label(self, tool: str) -> str:
        """`tool` if this runner knows it (a built-in or workspace tool, or one some executor
        serves); else `unknown`: the name comes from the model, never a label as it is."""
        return tool if tool_spec(tool) is not None or self._tools.executors(tool) else UNKNOWN

    def _started(self, event: RunStarted) -> None:
        self.started.labels(event.connector_id).inc()
        self._runs[event.run_id] = _Run(event.connector_id, self._clock(), arrival=event.arrival)
        while len(self._runs) > MAX_TRACKED_RUNS:
            self._runs.popitem(last=False)

    def _first_request(self, run_id: str) -> None:
        run = self._runs.get(run_id)
        if run is None or run.arrival is None:
            return
        arrival, run.arrival = run.arrival, None
        now = self._wall_clock()
        hops = arrival_hops(arrival, now)
        for hop, seconds in hops.items():
            self._hops[hop].observe(max(seconds, 0.0))  # clocks of two hosts may disagree a little
        if arrival.produced_at is not None:
            total = now - arrival.produced_at
            self.to_model_request.labels(run.connector).observe(max(total, 0.0))

    def _delta(self, event: MessageDelta) -> None:
        run = self._runs.get(event.run_id)
        if run is not None and not run.first_token:
            run.first_token = True
            self.first_token.labels(run.connector).observe(self._clock() - run.started_at)

    def _llm_completed(self, event: StepCompleted) -> None:
        connector = self._llm_steps.pop((event.run_id, event.step_id), UNKNOWN)
        model = self.model_of(connector)
        self.llm_calls.labels(connector, model, CallOutcome.OK).inc()
        try:
            usage = LlmStepOutput.model_validate(event.output).usage
        except ValidationError:
            return  # counted as a call; tokens it did not say cannot be counted
        for kind, count in ((TokenKind.PROMPT, usage.prompt_tokens), (TokenKind.COMPLETION, usage.completion_tokens)):
            if count > 0:
                self.llm_tokens.labels(connector, model, kind).inc(count)

    def _finished(self, event: RunFinished) -> None:
        run = self._runs.pop(event.run_id, None)
        for key in [k for k in self._llm_steps if k[0] == event.run_id]:
            del self._llm_steps[key]  # a step cut short by the ending emits no completion
        if event.depth > 0:
            return
        self.finished.labels(event.status, event.reason or NO_REASON).inc()
        if run is not None:
            self.duration.labels(run.connector).observe(self._clock() - run.started_at)
