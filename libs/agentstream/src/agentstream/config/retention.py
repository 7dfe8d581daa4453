"""The `retention` section: how long rows are kept, and the periodic purge that deletes older ones."""

from __future__ import annotations

from pydantic import Field, field_validator

from agentstream.config.core import Section

# Telegram keeps an undelivered update for 24 h and re-sends it until acknowledged; a shorter
# dedupe (or ledger) memory could let such a re-delivery (or a re-read) through a second time.
MIN_REPLAY_WINDOW_DAYS = 1.0


class RetentionSettings(Section):
    """Ages are in days (fractions allowed); 0 keeps the rows forever."""

    enabled: bool = Field(
        default=True,
        description="Services purge periodically; false: only `agentstream db purge` does (e.g. from cron).",
    )
    interval_s: float = Field(default=3600.0, gt=0, description="Time between two purges of a service.")
    batch_size: int = Field(default=5000, ge=1, le=100_000, description="Rows deleted per statement.")
    inbound_dedupe_days: float = Field(
        default=7.0, ge=0, description="ingress: dedupe rows older than this are deleted; 0 keeps them."
    )
    delivery_ledger_days: float = Field(
        default=7.0, ge=0, description="delivery: ledger rows of settled sends older than this; 0 keeps them."
    )
    history_days: float = Field(
        default=0.0, ge=0, description="persistence: messages, runs and resume state older than this; 0 keeps them."
    )
    revoked_keys_days: float = Field(
        default=0.0, ge=0, description="ingress: API keys revoked or expired longer ago than this; 0 keeps them."
    )
    pairing_codes_days: float = Field(
        default=1.0, ge=0, description="ingress: pairing codes expired longer ago than this; 0 keeps them."
    )

    @field_validator("inbound_dedupe_days", "delivery_ledger_days")
    @classmethod
    def _outlasts_redelivery(cls, days: float) -> float:
        if 0 < days < MIN_REPLAY_WINDOW_DAYS:
            raise ValueError(
                f"must be 0 (keep forever) or at least {MIN_REPLAY_WINDOW_DAYS:g} day: platforms re-deliver "
                "for up to 24 h (Telegram), and a forgotten row lets a re-delivery through twice"
            )
        return days


__all__ = ["MIN_REPLAY_WINDOW_DAYS", "RetentionSettings"]
