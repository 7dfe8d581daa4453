"""The assignment's orphan scan on the real broker (docs/decisions.md § Orphaned runs): a run open on
`events` is ended `runner_lost` only once it has been quiet for two heartbeats. A run still written to
by another runner — a broker may finish a rebalance before a member let go of its partitions — is left
to finish; one quiet that long already is ended at once, one written to a moment ago after the quiet.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from structlog.testing import capture_logs

from agentstream.contracts import (
    FinishReason,
    MessageDelta,
    ReplyTarget,
    RunEventAdapter,
    RunFinished,
    RunStarted,
    RunStatus,
    utcnow,
)
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream_runner.bootstrap import bootstrap as runner_bootstrap
from agentstream_testing.kafka import RawRecord, produce_raw, read_until

HEARTBEAT_S = 2.0  # two heartbeats of quiet: 4 s
DEAD_LONG_AGO, DEAD_JUST_NOW, ALIVE = "run-dead-long-ago", "run-dead-just-now", "run-alive-elsewhere"


def key(run_id: str) -> str:
    return f"web:{run_id}"


def started(run_id: str, age_s: float = 0.0) -> RunStarted:
    return RunStarted(
        run_id=run_id,
        root_run_id=run_id,
        conversation_key=key(run_id),
        seq=1,
        ts=utcnow() - timedelta(seconds=age_s),
        assistant_id="default",
        connector_id="fake",
        reply_target=ReplyTarget(platform="web", chat_id=run_id),
    )


def endings(records: list[RawRecord]) -> dict[str, list[RunFinished]]:
    found: dict[str, list[RunFinished]] = {}
    for r in records:
        if b'"run.finished"' in (r.value or b""):
            event = RunEventAdapter.validate_json(r.value)
            assert isinstance(event, RunFinished)
            found.setdefault(event.root_run_id, []).append(event)
    return found


async def test_a_run_still_written_to_elsewhere_is_not_ended_and_quiet_ones_are(settings_factory, topics_created):
    settings = settings_factory(runner={"heartbeat_s": HEARTBEAT_S})
    runner = runner_bootstrap(settings)
    bootstrap, events = settings.kafka.bootstrap_servers, runner.topics.events

    async def publish(event: RunStarted | MessageDelta | RunFinished) -> None:
        await produce_raw(bootstrap, events, event.to_json(), key=event.conversation_key.encode())

    for run in (started(DEAD_LONG_AGO, age_s=60), started(DEAD_JUST_NOW), started(ALIVE)):
        await publish(run)
    ids = {"run_id": ALIVE, "root_run_id": ALIVE, "conversation_key": key(ALIVE)}
    stop_writing = asyncio.Event()

    async def another_runner_streams() -> int:
        """ALIVE's runner is elsewhere: a delta every 0.3 s until told to stop, then its ending."""
        seq = 1
        while not stop_writing.is_set():
            seq += 1
            await publish(MessageDelta(**ids, seq=seq, message_id="m1", text=f"w{seq} "))
            await asyncio.sleep(0.3)
        await publish(RunFinished(**ids, seq=seq + 1, status=RunStatus.COMPLETED, text="done"))
        return seq + 1

    writer = asyncio.create_task(another_runner_streams())
    try:
        async with ServiceHost([runner], "127.0.0.1", {runner.name: free_port()}):
            lost = await read_until(
                bootstrap, events, lambda rs: {DEAD_LONG_AGO, DEAD_JUST_NOW} <= endings(rs).keys(), timeout=60
            )
            # ALIVE is judged at most one quiet time after the scan, while it still writes.
            await asyncio.sleep(2 * HEARTBEAT_S + 1)
            lost = await read_until(bootstrap, events, lambda rs: DEAD_JUST_NOW in endings(rs), timeout=30)
            assert ALIVE not in endings(lost), endings(lost)[ALIVE]
            stop_writing.set()
            last_seq = await writer
            records = await read_until(bootstrap, events, lambda rs: ALIVE in endings(rs), timeout=30)
            await asyncio.sleep(2 * HEARTBEAT_S + 1)  # a late second ending would be here
            records = await read_until(bootstrap, events, lambda rs: ALIVE in endings(rs), timeout=30)
    finally:
        stop_writing.set()
        await writer

    found = endings(records)
    assert [(e.status, e.reason) for e in found[DEAD_LONG_AGO]] == [(RunStatus.FAILED, FinishReason.RUNNER_LOST)]
    assert [(e.status, e.reason) for e in found[DEAD_JUST_NOW]] == [(RunStatus.FAILED, FinishReason.RUNNER_LOST)]
    assert [(e.status, e.seq) for e in found[ALIVE]] == [(RunStatus.COMPLETED, last_seq)]  # its own ending only


async def test_a_stop_does_not_wait_out_the_quiet_time_and_ends_nothing(settings_factory, topics_created):
    """A runner asked to stop while its scan waits for a run to be quiet leaves that run to the next
    owner at once: the wait (two heartbeats, here two minutes) held its consumer's stop, and with it the
    process's, past its bound (the broker-restart chaos test's runner, still running 30 s after SIGTERM)."""
    settings = settings_factory(runner={"heartbeat_s": 60.0})
    runner = runner_bootstrap(settings)
    bootstrap, events = settings.kafka.bootstrap_servers, runner.topics.events
    run = started(ALIVE)
    await produce_raw(bootstrap, events, run.to_json(), key=run.conversation_key.encode())
    with capture_logs() as logs:
        async with ServiceHost([runner], "127.0.0.1", {runner.name: free_port()}):
            for _ in range(600):  # the scan found the run open and waits for it to be quiet
                if any(line["event"].startswith("open runs written to lately") for line in logs):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"no quiet wait began: {logs}")
    said = [line["event"] for line in logs if line["log_level"] in ("info", "warning")]
    assert "stopping: open runs written to lately left to the next owner" in said, said
    assert "services did not stop in time; abandoning them" not in said, said
    assert "broker did not stop in time; abandoning it" not in said, said  # its consumer held by the wait
    records = await read_until(bootstrap, events, lambda rs: len(rs) >= 1, timeout=30)
    assert ALIVE not in endings(records)
