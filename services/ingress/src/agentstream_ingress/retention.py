"""ingress's retention: dedupe rows, expired pairing codes, revoked or expired API keys, and —
with history retention — what ingress remembers of conversations idle for longer than that.

Dedupe rows must outlive every way a message can arrive again: a platform re-delivering
(Telegram keeps an update for 24 h) and `inbound` being re-read (only from the committed
offset); the default week covers both with room to spare.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import null, or_

from agentstream.config import Settings
from agentstream.db.models_auth import ApiKey
from agentstream.db.models_ingress import InboundDedupe, IngressConversation, PairingCode
from agentstream.retention import Purge, cutoff, table_of


def ingress_purges(settings: Settings, now: datetime) -> list[Purge]:
    retention = settings.retention
    purges: list[Purge] = []
    if retention.inbound_dedupe_days:
        dedupe = table_of(InboundDedupe)
        purges.append(Purge(dedupe, dedupe.c.received_at < cutoff(now, retention.inbound_dedupe_days)))
    if retention.pairing_codes_days:
        codes = table_of(PairingCode)
        # A user's newest code also paces the next one (`authz.pairing.issue_interval_s`): keep it that long.
        issued_before = now - timedelta(seconds=settings.authz.pairing.issue_interval_s)
        purges.append(
            Purge(
                codes,
                (codes.c.expires_at < cutoff(now, retention.pairing_codes_days)) & (codes.c.issued_at < issued_before),
            )
        )
    if retention.revoked_keys_days:
        keys = table_of(ApiKey)
        before = cutoff(now, retention.revoked_keys_days)
        purges.append(Purge(keys, or_(keys.c.revoked_at < before, keys.c.expires_at < before)))
    if retention.history_days:
        # The last message (for /retry) and the run ids (for /status) of a conversation idle that
        # long: its runs are purged from history too, and runs ingress remembers are kept.
        conversations = table_of(IngressConversation)
        purges.append(
            Purge(
                conversations,
                (conversations.c.updated_at < cutoff(now, retention.history_days))
                & or_(conversations.c.last_message.is_not(None), conversations.c.pending_runs.is_not(None)),
                clear={"last_message": null(), "pending_runs": null()},
            )
        )
    return purges
