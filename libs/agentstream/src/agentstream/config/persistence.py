"""persistence sections: resume policy and the stale-run watchdog."""

from __future__ import annotations

from pydantic import Field

from agentstream.config.core import Section


class ResumeSettings(Section):
    auto: bool = Field(
        default=True,
        description="Issue a ResumeRun for a run whose runner went away (at most `max_attempts` times).",
    )
    max_attempts: int = Field(default=2, ge=0, description="Automatic resumes of one run, at most.")
    stale_after_s: float = Field(
        default=30.0, gt=0, description="A run with no event for this long was lost with its runner."
    )
    watchdog_interval_s: float = Field(default=1.0, gt=0, description="How often the watchdog looks for stale runs.")


__all__ = ["ResumeSettings", "Section"]
