"""delivery sections: platforms (hooks and relay join here)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from agentstream.config.core import Section
from agentstream.config.texts import ShownText


class ToolProgress(StrEnum):
    """Which tool calls a run's progress line shows while the model works."""

    OFF = "off"
    NEW = "new"  # a call of a tool other than the last one shown
    ALL = "all"


class TextFormat(StrEnum):
    """The markup a platform's messages are written in; the model's Markdown is rendered to it."""

    MARKDOWN = "markdown"  # the model's Markdown as written (memory, console, webhook receivers)
    PLAIN = "plain"  # markup removed: Signal, SMS-like targets, the fallback of a rejected frame
    TELEGRAM_HTML = "telegram_html"  # Bot API `parse_mode: HTML`
    SLACK_MRKDWN = "slack_mrkdwn"
    DISCORD_MARKDOWN = "discord_markdown"
    HTML = "html"  # the web chat page (sanitised: only the renderer's own tags)


class PlatformTexts(Section):
    """The fixed texts delivery writes into a platform's messages (`platforms.<name>.texts`).

    Each unset field keeps its default (English); a platform per language is how a locale is served.
    """

    stopped: ShownText = Field(default="⏹ stopped", description="Appended to a run someone stopped.")
    # Never empty: the web page tells tool lines and failures by these prefixes.
    tool_line_prefix: ShownText = Field(
        default="🔧 ", description="Starts the tool progress line (`🔧 search → fetch …`)."
    )
    failure_prefix: ShownText = Field(default="⚠️ The run failed: ", description="Precedes a failed run's error.")
    runner_lost: ShownText = "⚠️ The assistant stopped unexpectedly, before finishing its answer."
    rebalanced: ShownText = "⚠️ The assistant was moved to another worker before finishing its answer."
    shutdown: ShownText = "⏸ The assistant was restarted before finishing its answer."
    aborted: ShownText = "⚠️ The answer ended unexpectedly."
    resumed: ShownText = Field(
        default="⤵ Cut off here; the answer was resumed below.",
        description="Appended to an interrupted answer once its run is resumed.",
    )
    resumed_notice: ShownText = Field(
        default="⤵ The assistant was interrupted; its answer was resumed below.",
        description="A message of its own when the interrupted answer cannot take `resumed`.",
    )


class PlatformSettings(Section):
    """One chat platform (`platforms.<name>`); unset fields take the adapter's defaults."""

    enabled: bool = True
    api_url: str | None = Field(default=None, description="Base URL of the platform API (fakes, proxies).")
    token_env: str | None = Field(default=None, description="Env var holding the bot token.")
    secret_env: str | None = Field(default=None, description="Env var holding the webhook HMAC-SHA256 key.")
    api_key_env: str | None = Field(
        default=None,
        description="Web: env var holding delivery's API key (scope `gateway` for platform `web`) with which "
        "the chat page's messages are forwarded to ingress.",
    )
    history_url: str | None = Field(
        default=None, description="Web: persistence's read API the page's history comes from (default: this host's)."
    )
    history_key_env: str | None = Field(
        default=None,
        description="Web: env var holding delivery's API key (scope `conversations:read`) with which the chat "
        "page's history is read from persistence.",
    )
    account: str | None = Field(default=None, description="Sending account (Signal phone number).")
    edit_interval: float | None = Field(default=None, gt=0, description="Seconds between edits of one message.")
    max_length: int | None = Field(default=None, ge=1)
    buffer_threshold: int | None = Field(default=None, ge=1, description="New chars that justify an early edit.")
    tool_progress: ToolProgress | None = Field(default=None, description="Tool progress line.")
    chat_interval: float | None = Field(default=None, ge=0, description="Min seconds between calls to one chat.")
    drafts: bool | None = Field(default=None, description="Telegram: stream private chats as drafts.")
    formatting: TextFormat | None = Field(
        default=None, description="Markup the answers are rendered to (`plain` turns formatting off)."
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="HTTP client timeout of one platform call (default 10); past it the "
        "outcome of the call is unknown.",
    )
    late_landing_s: float | None = Field(
        default=None,
        gt=0,
        description="How long a call of unknown outcome may still land on the platform; "
        "the message's final text is re-applied once it has passed (default timeout_s + 5).",
    )
    texts: PlatformTexts = Field(default_factory=PlatformTexts, description="The fixed texts of this platform.")


# -- hooks (delivery's lifecycle hooks; see docs/configuration.md § hooks) ---------------


class SecurityHookSettings(Section):
    """The outgoing-text filter: redacts secrets before any platform sees them (previews too)."""

    enabled: bool = Field(default=True, description="Redact secrets from every outgoing frame.")
    patterns: list[str] = Field(default_factory=list, description="Extra regular expressions to redact.")
    mask: str = Field(default="[REDACTED]", description="What a redacted secret is replaced with.")
    redact_env: bool = Field(
        default=True, description="Also redact the values of the env vars the settings name (api_key_env, …)."
    )
    env: list[str] = Field(default_factory=list, description="More env var names whose values are secrets.")
    redact_storage: bool = Field(
        default=True, description="Persistence stores message and run text redacted the same way (not the raw text)."
    )


class AuditHookSettings(Section):
    enabled: bool = Field(default=False, description="Append every lifecycle event to the audit_log table.")
    points: list[str] = Field(default_factory=lambda: ["*"], description="Lifecycle points to record (globs).")


class BillingHookSettings(Section):
    enabled: bool = Field(default=False, description="Write usage per run into the usage table.")


class WebhookHookSettings(Section):
    url: str = Field(description="Where lifecycle events are POSTed as JSON.")
    points: list[str] = Field(default_factory=lambda: ["*"], description="Lifecycle points to send (globs).")
    secret_env: str | None = Field(
        default=None, description="Env var with the HMAC-SHA256 key for the X-Agentstream-Signature header."
    )
    timeout_s: float = Field(default=5.0, gt=0)
    attempts: int = Field(default=3, ge=1, description="Tries on transport errors and 5xx.")


class HooksSettings(Section):
    modules: list[str] = Field(
        default_factory=list, description="Python hook modules: `pkg.mod` (calls its `register`) or `pkg.mod:func`."
    )
    entry_points: bool = Field(default=True, description="Load hooks from the `agentstream.hooks` entry point group.")
    transform_budget_ms: float = Field(default=200.0, gt=0, description="Time budget of one transform hook call.")
    observer_timeout_s: float = Field(default=10.0, gt=0, description="Time budget of one observer hook call.")
    queue_size: int = Field(default=1000, ge=1, description="Bounded queue of each observer hook.")
    security: SecurityHookSettings = Field(default_factory=SecurityHookSettings)
    billing: BillingHookSettings = Field(default_factory=BillingHookSettings)
    audit: AuditHookSettings = Field(default_factory=AuditHookSettings)
    webhooks: list[WebhookHookSettings] = Field(default_factory=list)


# -- relay ---------------------------------------------------------------------------


class RelayMatch(Section):
    """Which conversations a rule applies to; an unset field matches anything."""

    platform: str | None = None
    chat_id: str | None = None
    thread_id: str | None = None


class RelayTarget(Section):
    platform: str
    chat_id: str
    thread_id: str | None = None


class RelayRule(Section):
    """Mirror a conversation's output to `to` (live, through the same stream consumer), or — with
    `profile` — forward each completed answer as a new inbound message to that profile at `to`."""

    match: RelayMatch = Field(default_factory=RelayMatch)
    to: RelayTarget
    profile: str | None = Field(default=None, description="Forward to this profile instead of mirroring.")
