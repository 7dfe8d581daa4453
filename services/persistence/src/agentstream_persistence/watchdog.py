"""The stale-run watchdog's decision, pure: the `run.finished` of a run lost with its runner.

The watchdog does not write the run itself: it publishes this ending on `events`, and
reading it back flushes the run like any other ending. Delivery reads the same event,
closes the stream and tells the user; a restart of persistence re-reads it too.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError

from agentstream.contracts import RunFinished, StepType, Usage, utcnow
from agentstream.contracts.steps import LlmStepOutput
from agentstream_persistence.buffers import RunBuffer


def usage_so_far(buf: RunBuffer) -> Usage:
    """Usage of the LLM steps that completed: what was billed before the runner was lost."""
    total = Usage()
    for step in buf.steps:
        if step.step_type == StepType.LLM:
            try:
                total = total + LlmStepOutput.model_validate(step.output).usage
            except ValidationError:
                continue
    return total


def lost_run_finished(buf: RunBuffer, stale_after_s: float, now: datetime | None = None) -> RunFinished:
    now = now or utcnow()
    text = buf.assistant[-1].text if buf.assistant else ""
    if partial := buf.incomplete_messages():
        text = partial[-1].text
    begun = buf.started.ts if buf.started else (buf.queued.ts if buf.queued else now)
    return RunFinished.runner_lost(
        root_run_id=buf.root_run_id,
        conversation_key=buf.conversation_key,
        seq=buf.max_seq + 1,
        epoch=0,
        error=f"the agent runner stopped responding (no event for {stale_after_s:g} s)",
        text=text,
        usage=usage_so_far(buf),
        duration_ms=(now - begun).total_seconds() * 1000,
    )
