"""delivery sections: platforms (hooks and relay join here)."""

from __future__ import annotations

from pydantic import Field

from agentstream.config.core import Section


class PlatformSettings(Section):
    enabled: bool = True
    api_url: str | None = None
    token_env: str | None = None
    edit_interval: float | None = Field(default=None, gt=0, description="Seconds between edits of one message.")
    max_length: int | None = Field(default=None, ge=1)


