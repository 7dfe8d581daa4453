"""ingress sections: authz (allow/deny lists, pairing, rate limit, self-echo), profiles,
routes, and the ingress service's own tuning (receive/command hooks, webhooks, HTTP limits).

Secrets (webhook secrets, signing secrets) are never values here: the file names the
environment variable that holds them (`secret_env`, `signing_secret_env`).
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import Field

from agentstream.config.core import Section
from agentstream.config.texts import Placeholders, ShownText, Texts, texts_for
from agentstream.contracts.runs import DoubleTexting


class AuthzRule(Section):
    """Who may start runs. Denylists win over everything; then `allow_all`; then the allowlists.

    With no allowlist at all, unknown users are refused — or, in a direct chat with pairing
    enabled, offered a pairing code.
    """

    allow_all: bool = Field(default=False, description="Everyone not denied may run agents.")
    users: list[str] = Field(default_factory=list, description="Allowed user ids.")
    teams: list[str] = Field(default_factory=list, description="Allowed team / guild / workspace ids.")
    deny_users: list[str] = Field(default_factory=list, description="Refused user ids (win over allows).")
    deny_teams: list[str] = Field(default_factory=list, description="Refused team ids (win over allows).")
    admins: list[str] = Field(
        default_factory=list, description="User ids who may `/approve` or `/deny` any user's tool call."
    )


class PairingSettings(Section):
    enabled: bool = Field(default=True, description="Offer pairing codes to unknown users in direct chats.")
    code_ttl_s: float = Field(default=3600.0, gt=0, description="A code expires after this long.")
    issue_interval_s: float = Field(default=600.0, ge=0, description="At most one new code per user per interval.")
    max_failures: int = Field(default=5, ge=1, description="Failed approvals that lock pairing for a platform.")
    lockout_s: float = Field(default=3600.0, gt=0, description="How long a platform's pairing stays locked.")


class RateLimitSettings(Section):
    """Per-user token bucket: `capacity` messages at once, refilled at `refill_per_s`."""

    enabled: bool = True
    capacity: float = Field(default=10.0, gt=0)
    refill_per_s: float = Field(default=0.5, gt=0)


class AuthzSettings(Section):
    default: AuthzRule = Field(
        default_factory=lambda: AuthzRule(allow_all=True),
        description="Rule for platforms without their own entry (open by default; close it in production).",
    )
    platforms: dict[str, AuthzRule] = Field(default_factory=dict, description="Per-platform rules.")
    pairing: PairingSettings = Field(default_factory=PairingSettings)
    rate_limit: RateLimitSettings = Field(default_factory=RateLimitSettings)
    bot_user_ids: dict[str, list[str]] = Field(
        default_factory=dict, description="platform → our own bots' user ids; their messages are self-echo."
    )

    def rule_for(self, platform: str) -> AuthzRule:
        return self.platforms.get(platform, self.default)


class ProfileSettings(Section):
    assistant: str | None = Field(default=None, description="Assistant id (else `default_assistant`).")
    connector_role: str | None = Field(default=None, description="Role → connector, sent as `use::<role>`.")
    double_texting: DoubleTexting | None = Field(default=None, description="Policy while a run is active.")
    delivery: dict[str, Any] = Field(default_factory=dict, description="Delivery settings passed with the run.")
    authz: AuthzRule | None = Field(default=None, description="Extra allow/deny lists for this profile.")


class RouteSettings(Section):
    """A route matches when every field it sets equals the message's; the most specific wins."""

    profile: str
    platform: str | None = None
    team: str | None = None
    chat: str | None = None
    thread: str | None = None
    bot: str | None = Field(default=None, description="The receiving bot (`metadata.bot`).")


class IngressHooks(Section):
    message_received: list[str] = Field(
        default_factory=list, description="`module:function` receive hooks, called in order."
    )
    commands: dict[str, list[str]] = Field(
        default_factory=dict, description="command name → `module:function` hooks run before the built-in."
    )


class TelegramWebhook(Section):
    secret_env: str = Field(description="Name of the env var holding X-Telegram-Bot-Api-Secret-Token.")

    def secret(self) -> str | None:
        return os.environ.get(self.secret_env)


class SlackWebhook(Section):
    signing_secret_env: str = Field(description="Name of the env var holding the Slack signing secret.")
    max_age_s: float = Field(default=300.0, gt=0, description="Older request timestamps are refused.")

    def secret(self) -> str | None:
        return os.environ.get(self.signing_secret_env)


class WebhookSettings(Section):
    telegram: dict[str, TelegramWebhook] = Field(default_factory=dict, description="bot name → webhook secret.")
    slack: SlackWebhook | None = None


class IngressTexts(Texts):
    """The fixed texts ingress answers with (`ingress.texts.<platform>`, or `ingress.texts.default`);
    templates as `Texts` says. None may be empty."""

    refused: ShownText = "You are not authorized to use this assistant."
    rate_limited: ShownText = "You are sending messages too fast; please wait a moment."
    pairing_code: Annotated[ShownText, Placeholders("code", "minutes")] = (
        "You are not authorized yet. Your pairing code is {code} (valid {minutes} min). "
        "Ask the operator to run: agentstream pairing approve {code}"
    )
    pairing_pending: ShownText = (
        "You are not authorized yet. A pairing code was sent recently; ask the operator to approve it."
    )
    pairing_locked: ShownText = "You are not authorized, and pairing is temporarily locked. Try again later."
    invalid_message: Annotated[ShownText, Placeholders("error")] = "Your message could not be processed: {error}"
    new_conversation: ShownText = "Started a new conversation."
    nothing_to_resume: ShownText = "There is no failed or interrupted run to resume."
    resuming: Annotated[ShownText, Placeholders("status", "run")] = "Resuming the {status} run {run}."
    nothing_to_retry: ShownText = "There is no earlier message to retry."
    queue_usage: ShownText = "Usage: /queue <text>"
    unknown_command: Annotated[ShownText, Placeholders("command")] = "Unknown command /{command}."


class IngressSettings(Section):
    hooks: IngressHooks = Field(default_factory=IngressHooks)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    max_body_bytes: int = Field(default=256 * 1024, ge=1024, description="Larger HTTP bodies get 413.")
    publish_timeout_s: float = Field(default=5.0, gt=0, description="HTTP answers 503 when Kafka is slower.")
    max_text_chars: int = Field(default=32_000, ge=1, description="Longer inbound texts are dead letters.")
    texts: dict[str, IngressTexts] = Field(
        default_factory=dict,
        description="platform → the texts ingress answers with; `default` for every platform without its own.",
    )

    def texts_for(self, platform: str) -> IngressTexts:
        """The platform's texts: the keys it sets, over those `default` sets, over the built-in ones."""
        return texts_for(self.texts, platform, IngressTexts)
