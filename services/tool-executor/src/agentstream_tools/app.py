"""tool-executor service: runs each `tool-calls` record and publishes its result.

Each call runs in its own task, so a slow tool never blocks the partition; a
semaphore bounds how many tools run at once. The result goes to `tool-results`
keyed by the request's conversation key (co-partitioned with the runner's `runs`).

Nothing lost, nothing run twice: offsets are committed by the `OldestOpen` policy
(agentstream.kafka.consumer), a partition only up to its oldest call whose result is not yet both acked by Kafka and
stored, and each `(run_id, call_id)` is claimed in `tool_calls` before its tool runs
(call_store.py). The result is published first and stored after, off the call's latency. A
call redelivered after a crash replays the stored result, or, when the executor died during
the call or before storing its published result, answers with a non-retryable error instead
of running the tool again (the runner takes a call's first result and ignores a later one).

Only calls a runner signed run (docs/tools.md § Which calls run): a record that is unsigned, whose
signature does not match, that names a tool outside its `offered` list, or a tool this executor
says requires approval without an `approval_id`, is refused before it is claimed: a failed,
non-retryable result (`refused` says why) answers it and the record goes to `dlq` with the reason.

While a call runs, `tool.heartbeat`s go to `events` (call_heartbeats.py): persistence's watchdog
never takes a slow call for a lost run, and a call past its timeout is answered as a tool error.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import Histogram

from agentstream.contracts import ToolCallRefusal, ToolCallRequest, ToolCallResult, ToolHeartbeat
from agentstream.contracts.tools import ToolCallRequestAdapter
from agentstream.db import upgrade
from agentstream.db.models_tools import ToolCallState
from agentstream.kafka.commit_policies import OldestOpen
from agentstream.kafka.consumer import Consumed, Consumer, Contract, Polling
from agentstream.kafka.topics import EVENTS, TOOL_RESULTS
from agentstream.service import Runtime
from agentstream.tool_call_signing import refusal, refusal_error
from agentstream_tools.call_heartbeats import heartbeats
from agentstream_tools.call_store import ToolCallStore, stopped_during_call
from agentstream_tools.catalog import CatalogPublisher
from agentstream_tools.executor import answer, execute
from agentstream_tools.mcp_servers import McpServers
from agentstream_tools.registry import ToolRegistry

T = TypeVar("T")
Origin = tuple[int, int]  # (partition, offset) of a tool-calls record
DRAIN_S = 5.0  # on stop, calls still running get this long to finish (the broker stop has its own 10 s)
RETRY_MAX_S = 5.0
COMMIT_DELAY_S = 0.1  # one commit for the calls answered within this: not a broker request per call
MAX_BATCH = 500  # records taken per poll
POLL_WAIT_MS = 100  # an empty poll waits this long for records (a record ends the wait at once)


UNKNOWN_TOOL = "unknown"  # the metric label of a call to a tool this executor does not serve


def _outcome(result: ToolCallResult) -> str:
    if result.ok:
        return "ok"
    return "retryable" if result.retryable else "failed"


class ToolExecutorService:
    name = "tool-executor"

    def __init__(
        self,
        runtime: Runtime,
        *,
        tools: ToolRegistry,
        store: ToolCallStore,
        mcp_servers: McpServers,
        catalog: CatalogPublisher,
        call_secret: bytes | None = None,
    ) -> None:
        """`call_secret`: verifies the runners' signatures; None (only with `tools.accept_unsigned_calls`)
        refuses every signed call and runs unsigned ones."""
        self.runtime = runtime  # its parts and their lifecycle (agentstream.service)
        self.infra = runtime.infra
        self.settings = runtime.settings
        self.topics = runtime.topics
        self.registry = runtime.registry
        self.log = runtime.log
        self.http = runtime.http
        self._call_secret = call_secret
        self.tools = tools
        self.store = store
        self.mcp_servers = mcp_servers
        self.catalog = catalog
        self._slots = asyncio.Semaphore(self.settings.tools.max_concurrency)
        self._tasks: dict[asyncio.Task[bool], Origin] = {}
        self._live: dict[str, asyncio.Task[bool]] = {}  # idempotency key → the task running it here
        self._stopping = False
        self._withdrawal: asyncio.Task[None] | None = None
        self.calls = runtime.counter(
            "agentstream_tool_calls_total", "Tool calls run, by tool and outcome", ["tool", "outcome"]
        )
        self.refusals = runtime.counter(
            "agentstream_tool_calls_refused_total",
            "Tool calls refused without running (unsigned, bad_signature, not_offered, not_approved), by reason",
            ["reason"],
        )
        self.replays = runtime.counter(
            "agentstream_tool_call_replays_total",
            "Redelivered tool calls answered without running the tool (stored: the stored result; "
            "stopped: the executor had died during the call)",
            ["outcome"],
        )
        self.durations = Histogram(
            "agentstream_tool_call_seconds", "Tool call duration", ["tool"], registry=self.registry
        )
        self._series: dict[tuple[str, str], tuple[Any, Any]] = {}  # (tool, outcome) → (calls, durations) child
        # Records as they were polled together: FastStream's per-message path (parsing, its
        # middlewares, its metrics) cost more CPU per call than the call's own work. Each call
        # is open from its read until its result is acked and stored: no commit past an unanswered call.
        self.requests = runtime.consuming(
            Consumer(
                runtime.source,
                topic=self.topics.tool_calls,
                group=runtime.group_id,
                policy=OldestOpen(each_record_open=True, commit_within_s=COMMIT_DELAY_S),
                decode=Contract(ToolCallRequestAdapter, "ToolCallRequest"),
                handler=self.on_call,
                polling=Polling(max_records=MAX_BATCH, wait_ms=POLL_WAIT_MS, at_once=True),
                on_revoked=self.partitions_revoked,
            )
        )

    async def on_start(self) -> None:
        await upgrade(self.settings.database.url)  # idempotent: a fresh database just works
        await self.mcp_servers.start()

    async def start(self) -> None:
        for reason in ToolCallRefusal:  # every series at zero: an alert on a rise needs a start
            self.refusals.labels(reason)
        await self.runtime.start(self.on_start)
        self.catalog.start()  # publishing needs the broker's producer: after the start

    # -- calls ---------------------------------------------------------------------
    async def on_call(self, consumed: Consumed[ToolCallRequest]) -> None:
        """A `tool-calls` record, in the order polled: its call starts in a task of its own."""
        if self._stopping:  # left open, so not committed: the next start reads it
            return
        origin = (consumed.partition, consumed.offset)
        request = consumed.record
        refused = refusal(
            request,
            secret=self._call_secret,
            accept_unsigned=self.settings.tools.accept_unsigned_calls,
            requires_approval=self.catalog.requires_approval(request.tool),
        )
        if refused is not None:
            await self._refuse(consumed.source, request, refused)
            self._done(origin)
            return
        with self.infra.tracing.consuming(consumed.source, f"{consumed.topic} process"):  # the trace the record carries
            self._start_call(request, origin)

    async def _refuse(self, record: Any, request: ToolCallRequest, reason: ToolCallRefusal) -> None:
        """Answered, so a runner that did send it does not wait out its timeout, and dead-lettered,
        so an operator sees who tried; never claimed (a redelivery is refused again)."""
        error = refusal_error(reason, request.tool)
        self.refusals.labels(reason).inc()
        self.log.warning("tool call refused", call=request.idempotency_key, tool=request.tool[:64], reason=reason)
        result = answer(request, ok=False, error=error, retryable=False, refused=reason)
        await self.runtime.publish(TOOL_RESULTS, result)
        await self.runtime.dead_letter_record(record, f"{error} ({reason})")

    def _start_call(self, request: ToolCallRequest, origin: Origin) -> None:
        key = request.idempotency_key
        live = self._live.get(key)
        coro = self._follow(live, origin) if live is not None else self._handle(request, origin)
        # The call's task logs with the run's ids.
        task = asyncio.create_task(coro, name=f"tool:{key}", context=self.runtime.task_log_context(request))
        self._tasks[task] = origin
        if live is None:
            self._live[key] = task
        task.add_done_callback(functools.partial(self._forget_task, key))

    def _forget_task(self, key: str, task: asyncio.Task[bool]) -> None:
        self._tasks.pop(task, None)
        if self._live.get(key) is task:
            del self._live[key]

    async def _follow(self, live: asyncio.Task[bool], origin: Origin) -> bool:
        """A redelivery of a call still running here (a rebalance gave its partition back):
        the running task answers it; this record is done when that one is."""
        await asyncio.wait({live})
        answered = not live.cancelled() and live.result()
        if answered:
            self._done(origin)
        return answered

    async def _handle(self, request: ToolCallRequest, origin: Origin) -> bool:
        try:
            # Under the call record's span (this task started in its handler); the result
            # record carries this span back to the runner.
            with self.infra.tracing.span(
                f"tool {request.tool}", {"gen_ai.tool.name": request.tool, "gen_ai.tool.call.id": request.call_id}
            ) as span:
                result, unstored = await self._answer(request)
                span.set_attribute("agentstream.tool.ok", result.ok)
                await self._retrying(
                    "publish the result",
                    request,
                    # With the other results of its wave: one record batch per partition.
                    lambda: self.runtime.publish_batched(TOOL_RESULTS, result),
                )
                # Stored after its publication, before its offset is committed: a crash between
                # leaves the claim `running`, so the redelivery answers "stopped", which the runner
                # ignores: it has this result already (same partition, earlier offset).
                if unstored:
                    await self._retrying("store the result", request, lambda: self.store.finish(request, result))
        except Exception as err:  # stopping, or a bug: the call stays uncommitted and is read again
            self.log.error(
                "tool result not published", call=request.idempotency_key, tool=request.tool, error=repr(err)
            )
            return False
        self._done(origin)
        return True

    async def _answer(self, request: ToolCallRequest) -> tuple[ToolCallResult, bool]:
        """The call's result, and whether it is still to be stored (not a replay)."""
        store = self.store
        async with self._slots:  # claimed only when it can run: a call queued here never ran
            prior = await self._retrying("claim the call", request, lambda: store.claim(request))
            if isinstance(prior, ToolCallResult):
                self.replays.labels("stored").inc()
                self.log.info(
                    "tool call replayed from its stored result", call=request.idempotency_key, tool=request.tool
                )
                return prior, False
            if prior is ToolCallState.RUNNING:
                self.replays.labels("stopped").inc()
                self.log.warning(
                    "tool call not repeated: the executor stopped during it",
                    call=request.idempotency_key,
                    tool=request.tool,
                )
                # Stored like any result: a later redelivery replays this very answer.
                return stopped_during_call(request), True
            async with heartbeats(request, self._publish_beat, self.settings.tools.heartbeat_interval_s):
                result = await execute(self.tools, request, self.settings.runner.tool_timeout_s)
        self._count(request.tool, result)
        self.log.info(
            "tool call done",
            call=request.idempotency_key,
            tool=request.tool,
            ok=result.ok,
            retryable=result.retryable,
            duration_ms=round(result.duration_ms, 1),
        )
        return result, True

    def _count(self, tool: str, result: ToolCallResult) -> None:
        # A label is a tool this executor serves: any name a record carries would grow the series without bound.
        label = tool if self.tools.get(tool) is not None else UNKNOWN_TOOL
        outcome = _outcome(result)
        series = self._series.get((label, outcome))
        if series is None:  # looked up once per tool and outcome, not per call
            series = self._series[label, outcome] = (self.calls.labels(label, outcome), self.durations.labels(label))
        calls, durations = series
        calls.inc()
        durations.observe(result.duration_ms / 1000)

    async def _publish_beat(self, beat: ToolHeartbeat) -> None:
        ack = await self.runtime.publish_nowait(EVENTS, beat)
        await asyncio.wait({ack})  # not `await ack`: a call that ends cancels the beat, never the producer's future
        ack.result()

    async def _retrying(self, what: str, request: ToolCallRequest, step: Callable[[], Awaitable[T]]) -> T:
        """A database or broker outage must not lose a call: try again, with backoff, until it
        works or the service stops (then the call is read again after the restart)."""
        delay = 0.2
        while True:
            try:
                return await step()
            except Exception as err:
                if self._stopping:
                    raise
                self.log.warning(
                    f"could not {what}; retrying", call=request.idempotency_key, error=repr(err), retry_in_s=delay
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    # -- offsets -------------------------------------------------------------------
    def _done(self, origin: Origin) -> None:
        """The call is answered (result acked and stored): committable, in a round shortly."""
        self.requests.done_at(*origin)

    async def commit(self) -> None:
        """Commit every partition up to its oldest call not yet answered."""
        await self.requests.commit()

    async def partitions_revoked(self, partitions: set[int]) -> None:
        """Let the calls of those partitions finish (bounded) and commit them: their new owner
        would otherwise find them claimed and answer them as interrupted."""
        running = {t for t, origin in self._tasks.items() if origin[0] in partitions}
        if running:
            await asyncio.wait(running, timeout=self.settings.runner.tool_timeout_s)
        await self.commit()
        self.requests.forget(partitions)

    async def drain(self, grace_s: float) -> None:
        await self.runtime.drain(grace_s, self.on_drain)

    async def on_drain(self) -> None:
        """No new call is read; the calls running finish (their results published, their offsets
        committed by `stop`) within the grace period."""
        await asyncio.shield(self._withdraw())  # the grace ending must not cut the withdrawal short
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def _withdraw(self) -> asyncio.Task[None]:
        """Once, whoever asks first (the drain or the stop): runners stop offering this executor's
        tools while its last calls finish."""
        self._stopping = True
        if self._withdrawal is None:
            withdrawal = self.runtime.final_step(self.catalog.withdraw(), "tool catalog withdrawal")
            self._withdrawal = asyncio.create_task(withdrawal, name="tool-catalog-withdrawal")
        return self._withdrawal

    async def stop(self) -> None:
        await self._withdraw()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=DRAIN_S)
        try:
            async with asyncio.timeout(DRAIN_S):
                await self.requests.flush()  # not left to commit on a stopped consumer
        except TimeoutError:
            self.log.warning("offsets not committed on stop: the calls answered last are read again")
        await self.runtime.stop(self.on_stop)

    async def on_stop(self) -> None:
        # The broker is stopped: results of calls still running could not be published. Their
        # claims stay `running`: after a restart they are answered as interrupted, not repeated.
        self.runtime.cut("tool_calls", sum(not task.done() for task in self._tasks))
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        await self.mcp_servers.stop()
        await self.store.close()
