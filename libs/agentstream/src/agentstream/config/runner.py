"""agent-runner sections: connectors, runner tuning."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from agentstream.config.core import Section
from agentstream.config.texts import Placeholders, ShownText, Texts, texts_for

Capability = Literal["tools", "vision", "reasoning", "streaming"]
DEFAULT_CAPABILITIES: tuple[Capability, ...] = ("tools", "streaming")


class ConnectorType(StrEnum):
    """The connector kinds (`connectors[].type`): each has a factory in the runner and a probe in
    `agentstream doctor`."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    SCRIPTED = "scripted"


class ConnectorSettings(Section):
    id: str
    type: ConnectorType
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = Field(default=None, description="Name of the env var holding the API key.")
    capabilities: list[Capability] = Field(default_factory=lambda: list(DEFAULT_CAPABILITIES))
    script: str | None = Field(default=None, description="scripted: path of a YAML script (default: built-in demo).")
    token_delay_ms: float = Field(default=20.0, ge=0, description="scripted: pause between streamed tokens.")
    timeout_s: float = Field(default=60.0, gt=0, description="openai/anthropic: timeout of one HTTP request.")
    http_client: Literal["aiohttp", "httpx"] = Field(
        default="aiohttp", description="openai: the SDK's HTTP transport (aiohttp costs about half the CPU per chunk)."
    )
    retry_attempts: int = Field(default=3, ge=1, description="openai/anthropic: attempts for transient errors.")
    retry_base_delay_s: float = Field(default=0.5, ge=0, description="Backoff base when no Retry-After is sent.")
    max_tokens: int = Field(default=1024, ge=1, description="anthropic: default max_tokens of a request.")

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class RunnerTexts(Texts):
    """The fixed texts the runner tells a chat (`runner.texts.<platform>`, or `runner.texts.default`):
    the tool approval notices and the refusal of a message sent while a run is busy. Templates as
    `Texts` says. None may be empty."""

    approval_needed: ShownText = "Approval needed: the assistant wants to run"
    approval_call: Annotated[ShownText, Placeholders("tool", "arguments")] = "• {tool} {arguments}"
    approval_answer: Annotated[ShownText, Placeholders("expires")] = "Answer /approve or /deny (expires in {expires})."
    approval_not_yours: Annotated[ShownText, Placeholders("user", "command")] = (
        "Only the user who asked ({user}) or an admin can /{command} this; it is still waiting."
    )
    approved: Annotated[ShownText, Placeholders("user", "tools")] = "Approved by {user}: running {tools}."
    denied: Annotated[ShownText, Placeholders("user", "tools")] = "Denied by {user}: {tools} not run."
    expired: Annotated[ShownText, Placeholders("tools", "expires")] = (
        "The approval of {tools} expired after {expires}: not run."
    )
    no_pending_approval: ShownText = "There is no tool call waiting for approval."
    busy: ShownText = "Still working on your previous message; this one was not sent. Try again when it is done."


class RunnerSettings(Section):
    coalesce_ms: float = Field(default=50.0, ge=0, description="Window in which text deltas are merged.")
    tool_timeout_s: float = Field(default=30.0, gt=0)
    handover_s: float = Field(
        default=30.0,
        ge=0,
        description="A runs partition moving to another runner (a rebalance): how long its active runs get to "
        "finish here first; what still runs then ends failed(rebalanced). 0: they end at once.",
    )
    approval_expiry_s: float = Field(
        default=600.0,
        gt=0,
        description="A tool call waiting for `/approve` is refused as expired after this long (docs/tools.md).",
    )
    heartbeat_s: float = Field(default=5.0, gt=0)
    collect_window_ms: float = Field(
        default=1000.0, ge=0, description="double_texting collect: how long to wait for more messages."
    )
    texts: dict[str, RunnerTexts] = Field(
        default_factory=dict,
        description="platform → the texts the runner tells a chat; `default` for every platform without its own.",
    )

    def texts_for(self, platform: str) -> RunnerTexts:
        """The platform's texts: the keys it sets, over those `default` sets, over the built-in ones."""
        return texts_for(self.texts, platform, RunnerTexts)
