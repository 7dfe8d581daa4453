"""How a root run ends: a small state machine feeding the one `run.finished`.

RUNNING → COMPLETED | FAILED | INTERRUPTED, exactly once. The pipeline records
usage and the latest assistant text while running; `finished_fields` turns the
final state into the fields of `RunFinished`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from agentstream.contracts import FinishReason, RunStatus, Usage


class RunState(StrEnum):
    RUNNING = "running"
    COMPLETED = RunStatus.COMPLETED.value
    FAILED = RunStatus.FAILED.value
    INTERRUPTED = RunStatus.INTERRUPTED.value


# A stop that is not the run's fault but must be resumed on the conversation's new owner.
FAILING_STOPS = frozenset({FinishReason.REBALANCED})


class RunFailure(Exception):
    """An expected failure that ends the run `failed`; `str(err)` becomes `RunFinished.error`.

    Anything else raised inside a run is a bug: it is also recorded as `failed`, but then
    re-raised so its traceback is logged.
    """


class InvalidTransition(RuntimeError):
    pass


class RunOutcome:
    def __init__(self, started_at: float) -> None:
        self.state = RunState.RUNNING
        self.started_at = started_at
        self.error: str | None = None
        self.reason: FinishReason | None = None
        self.text = ""
        self.data: dict[str, Any] = {}
        self.usage = Usage()

    # -- while running -----------------------------------------------------------
    def add_usage(self, usage: Usage) -> None:
        self.usage = self.usage + usage

    def set_answer(self, text: str, data: dict[str, Any] | None = None) -> None:
        """The answer of the root run, and what a `next` hook attached to it."""
        self.text = text
        self.data = dict(data or {})

    # -- transitions -------------------------------------------------------------
    def complete(self) -> None:
        self._end(RunState.COMPLETED)

    def fail(self, error: str, reason: FinishReason = FinishReason.ERROR) -> None:
        self._end(RunState.FAILED, error=error, reason=reason)

    def interrupt(self, reason: FinishReason | None) -> None:
        self._end(RunState.INTERRUPTED, reason=reason)

    def stop(self, reason: FinishReason | None) -> None:
        """Cancelled by its owner: `interrupted`, except when the runner lost the
        conversation (rebalance): then `failed`, so it is resumed on the new owner."""
        if reason in FAILING_STOPS:
            self.fail(f"run stopped: {reason}", reason=reason)
        else:
            self.interrupt(reason)

    def _end(self, state: RunState, error: str | None = None, reason: FinishReason | None = None) -> None:
        if self.state is not RunState.RUNNING:
            raise InvalidTransition(f"run already ended as {self.state}, cannot end as {state}")
        self.state, self.error, self.reason = state, error, reason

    # -- the end -----------------------------------------------------------------
    def finished_fields(self, now: float) -> dict[str, Any]:
        if self.state is RunState.RUNNING:
            # Only a BaseException the pipeline does not handle gets here (e.g. GeneratorExit).
            self.fail("run ended unexpectedly", reason=FinishReason.ABORTED)
        return {
            "status": RunStatus(self.state.value),
            "error": self.error,
            "reason": self.reason,
            "text": self.text,
            "usage": self.usage,
            "duration_ms": round((now - self.started_at) * 1000, 3),
            "data": self.data,
        }
