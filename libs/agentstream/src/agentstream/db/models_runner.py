"""Tables owned by the runner area (add models here; migrations in migrations/versions)."""

from __future__ import annotations

from agentstream.db.models import Base

__all__ = ["Base"]
