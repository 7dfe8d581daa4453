"""Tables owned by the runner area.

`role_settings`: per-user and per-team overrides of connector roles
(`use::<role>` in an assistant or request). System-level roles live in the
config (`roles`). Migration: `migrations/versions/0002_runner.py`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from agentstream.db.models import Base

ROLE_SCOPES = ("user", "team")


class RoleSetting(Base):
    """`role` resolves to `connector_id` for one user or one team."""

    __tablename__ = "role_settings"

    scope: Mapped[str] = mapped_column(String(16), primary_key=True, doc="user | team")
    subject_id: Mapped[str] = mapped_column(String(256), primary_key=True, doc="The user id or team id.")
    role: Mapped[str] = mapped_column(String(128), primary_key=True)
    connector_id: Mapped[str] = mapped_column(String(128))
    updated_at: Mapped[datetime]


__all__ = ["Base", "ROLE_SCOPES", "RoleSetting"]
