"""Which platforms delivery talks to, built from `platforms.<name>` settings.

`PLATFORMS` names every HTTP platform delivery can be configured for: its adapter and
where its credential comes from. Credentials come only from environment variables the
settings name (`token_env`, `secret_env`); every `api_url` can be pointed elsewhere
(fakes in tests, proxies, self-hosted Bot API servers). A platform whose credential is
missing is skipped with a warning rather than failing the service. The settings of a
platform override its adapter's `Capabilities` (docs/configuration.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import structlog
from rich.console import Console

from agentstream.config import Settings
from agentstream.config.delivery import PlatformSettings
from agentstream.contracts import KnownPlatform
from agentstream.secrets_mask import mask_url
from agentstream_delivery.adapters import (
    ConsoleAdapter,
    DiscordAdapter,
    MemoryAdapter,
    PlatformAdapter,
    SignalAdapter,
    SlackAdapter,
    TelegramAdapter,
    WebhookAdapter,
)
from agentstream_delivery.adapters.base import Capabilities
from agentstream_delivery.adapters.http import HttpAdapter
from agentstream_delivery.adapters.web import WebAdapter
from agentstream_delivery.deliverer import DEFAULT_LATE_LANDING_S
from agentstream_delivery.render import FixedTexts

T = TypeVar("T")
LATE_LANDING_MARGIN_S = 5.0  # how long after its client gave up a platform may still apply a request


@dataclass(frozen=True)
class Platform:
    """An HTTP platform: built as `adapter(credential, api_url=..., timeout=...)`."""

    adapter: Callable[..., HttpAdapter]
    credential_env: str  # read when the settings name no variable of their own
    credential_setting: Literal["token_env", "secret_env"] = "token_env"
    account_first: bool = False  # `platforms.<name>.account` is the credential when set (Signal's number)
    url_required: bool = False  # no public endpoint: `api_url` must be set

    def credential(self, conf: PlatformSettings) -> str | None:
        if self.account_first and conf.account:
            return conf.account
        return os.environ.get(getattr(conf, self.credential_setting) or self.credential_env) or None

    def build(self, conf: PlatformSettings) -> HttpAdapter | None:
        """The adapter, or None when its credential (or required url) is missing."""
        credential = self.credential(conf)
        if credential is None or (self.url_required and not conf.api_url):
            return None
        options: dict[str, Any] = {"api_url": conf.api_url} if conf.api_url else {}
        if conf.timeout_s is not None:
            options["timeout"] = conf.timeout_s
        return self.adapter(credential, **options)


PLATFORMS: dict[str, Platform] = {
    KnownPlatform.TELEGRAM: Platform(TelegramAdapter, "TELEGRAM_BOT_TOKEN"),
    KnownPlatform.SLACK: Platform(SlackAdapter, "SLACK_BOT_TOKEN"),
    KnownPlatform.DISCORD: Platform(DiscordAdapter, "DISCORD_BOT_TOKEN"),
    KnownPlatform.SIGNAL: Platform(SignalAdapter, "SIGNAL_ACCOUNT", account_first=True),
    KnownPlatform.WEBHOOK: Platform(WebhookAdapter, "AGENTSTREAM_WEBHOOK_SECRET", "secret_env", url_required=True),
}

# The platforms whose adapters live inside delivery (no credential, always built; `Adapters`).
IN_PROCESS = frozenset({KnownPlatform.MEMORY, KnownPlatform.CONSOLE, KnownPlatform.WEB})


@dataclass(frozen=True)
class Adapters:
    """The adapters of one delivery service. The in-process ones always exist (delivery's routes read
    them); `enabled` maps each platform delivered to (`platforms.<name>.enabled`) to its adapter."""

    memory: MemoryAdapter
    web: WebAdapter
    enabled: dict[str, PlatformAdapter]

    @classmethod
    def build(cls, settings: Settings, log: structlog.stdlib.BoundLogger, console: Console | None = None) -> Adapters:
        memory, web = MemoryAdapter(), WebAdapter()
        in_process: list[PlatformAdapter] = [memory, ConsoleAdapter(console), web]
        enabled = [a for a in in_process if is_enabled(settings, a.platform)] + build_adapters(settings, log)
        return cls(memory, web, {a.platform: configure(a, settings.platforms.get(a.platform)) for a in enabled})


def is_enabled(settings: Settings, platform: str) -> bool:
    conf = settings.platforms.get(platform)
    return conf is None or conf.enabled


def build_adapters(settings: Settings, log: structlog.stdlib.BoundLogger) -> list[PlatformAdapter]:
    adapters: list[PlatformAdapter] = []
    for name, conf in settings.platforms.items():
        platform = PLATFORMS.get(name)
        if not conf.enabled or name in IN_PROCESS:
            continue
        if platform is None:
            log.warning("platform configured but delivery has no adapter for it; skipped", platform=name)
            continue
        adapter = platform.build(conf)
        if adapter is None:
            log.warning("platform configured without its credential or url; skipped", platform=name)
            continue
        log.info("platform ready", platform=name, endpoint=mask_url(adapter.endpoint))
        adapters.append(adapter)
    return adapters


def configure(adapter: PlatformAdapter, conf: PlatformSettings | None) -> PlatformAdapter:
    """The adapter with `platforms.<name>` settings applied to its capabilities (unset ones keep its defaults)."""
    if conf is None:
        return adapter
    adapter.capabilities = with_settings(adapter.capabilities, conf)
    return adapter


def with_settings(caps: Capabilities, conf: PlatformSettings) -> Capabilities:
    return replace(
        caps,
        max_length=_set_or(conf.max_length, caps.max_length),
        edit_interval=_set_or(conf.edit_interval, caps.edit_interval),
        buffer_threshold=_set_or(conf.buffer_threshold, caps.buffer_threshold),
        tool_progress=_set_or(conf.tool_progress, caps.tool_progress),
        chat_interval=_set_or(conf.chat_interval, caps.chat_interval),
        draft_streaming=_set_or(conf.drafts, caps.draft_streaming),
        formatting=_set_or(conf.formatting, caps.formatting),
        texts=FixedTexts.of(conf.texts),
    )


def _set_or(setting: T | None, default: T) -> T:
    return default if setting is None else setting


def late_landing(adapter: PlatformAdapter, conf: PlatformSettings | None) -> float:
    """How long a call of unknown outcome may still land: `late_landing_s`, else the client timeout + a margin."""
    if conf is not None and conf.late_landing_s is not None:
        return conf.late_landing_s
    return DEFAULT_LATE_LANDING_S if adapter.timeout is None else adapter.timeout + LATE_LANDING_MARGIN_S
