"""delivery's retention: ledger rows of settled sends, once older than `retention.delivery_ledger_days`.

A restarted delivery needs a run's rows only while its stream may still be re-read from
`events` (committed offsets never pass an unfinished stream), so a week is plenty.
"""

from __future__ import annotations

from datetime import datetime

from agentstream.config import Settings
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.retention import Purge, cutoff, table_of
from agentstream_delivery.ledger import SETTLED_STATES


def delivery_purges(settings: Settings, now: datetime) -> list[Purge]:
    days = settings.retention.delivery_ledger_days
    if not days:
        return []
    ledger = table_of(DeliveryLedger)
    return [Purge(ledger, ledger.c.state.in_(sorted(SETTLED_STATES)) & (ledger.c.updated_at < cutoff(now, days)))]
