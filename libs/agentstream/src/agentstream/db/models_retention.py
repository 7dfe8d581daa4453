"""Indexes on the timestamps retention purges by (migration `0010_retention_indexes`).

Declared here, not on the columns, so they sit next to each other and the purge they serve;
each names a column of a model owned by another area.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Index

from agentstream.db.models import Message, Run
from agentstream.db.models_delivery import DeliveryLedger
from agentstream.db.models_ingress import InboundDedupe, IngressConversation, PairingCode
from agentstream.db.models_persistence import ResumeStep, RunCheckpoint

AGE_COLUMNS: tuple[tuple[Any, str], ...] = (
    (InboundDedupe, "received_at"),
    (PairingCode, "expires_at"),
    (IngressConversation, "updated_at"),
    (DeliveryLedger, "updated_at"),
    (Message, "created_at"),
    (Run, "finished_at"),
    (ResumeStep, "created_at"),
    (RunCheckpoint, "updated_at"),
)

RETENTION_INDEXES = tuple(
    Index(f"ix_{model.__tablename__}_{column}", model.__table__.c[column]) for model, column in AGE_COLUMNS
)
