"""The auth table: API keys, stored hashed (the secret is shown once, at creation)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base


class ApiKey(Base):
    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    secret_hash: Mapped[str] = mapped_column(String(64), doc="sha256 hex of the key's secret part.")
    name: Mapped[str] = mapped_column(String(128))
    tenant_id: Mapped[str] = mapped_column(String(256), index=True)
    scopes: Mapped[list[Any]] = mapped_column(JSON)
    platform: Mapped[str | None] = mapped_column(String(64))
    user_id: Mapped[str | None] = mapped_column(String(256))
    gateway_platforms: Mapped[list[Any]] = mapped_column(JSON)
    profiles: Mapped[list[Any]] = mapped_column(JSON)
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
