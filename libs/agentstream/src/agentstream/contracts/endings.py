"""How a run ends: the `status` and `reason` of `run.finished` (and of `run.interrupt`).

The values are the public contract (topic records, the runs table, the read API):
they never change spelling. Every service compares against these members, never
against string literals of its own.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class FinishReason(StrEnum):
    """Why a run ended the way it did; `None` on a run that simply answered."""

    # interrupted: someone asked the run to stop
    USER = "user"  # `/stop` (and `run.interrupt` without a reason)
    RESET = "reset"  # `/new`: the conversation's session was reset
    DOUBLE_TEXTING = "double_texting"  # a newer message of the same conversation interrupted it
    SHUTDOWN = "shutdown"  # the runner stopped gracefully (resumable)
    # failed
    ERROR = "error"  # the run failed; `error` says why (a message meant for the user)
    REBALANCED = "rebalanced"  # its conversation moved to another runner (resumable)
    RUNNER_LOST = "runner_lost"  # persistence's watchdog: no event for `resume.stale_after_s` (resumable)
    ABORTED = "aborted"  # the runner ended it without a normal ending (a bug)
    REJECTED = "rejected"  # double texting `reject`: it never ran, a notice told the user
    # completed
    MERGED = "merged"  # double texting `collect`: its text ran inside another run


# Endings that say "the runner went away", not "the run went wrong": the run can
# continue elsewhere (`resume.auto`) from its checkpoint.
RESUMABLE_REASONS = frozenset({FinishReason.RUNNER_LOST, FinishReason.REBALANCED, FinishReason.SHUTDOWN})
# Runs that never ran on their own: no input of theirs is stored, nothing to resume.
NOT_RUN_REASONS = frozenset({FinishReason.MERGED, FinishReason.REJECTED})
