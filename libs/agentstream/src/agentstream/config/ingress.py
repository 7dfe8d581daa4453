"""ingress sections (authz, profiles, routes): typed models live here."""

from __future__ import annotations

from agentstream.config.core import Section

__all__ = ["Section"]
