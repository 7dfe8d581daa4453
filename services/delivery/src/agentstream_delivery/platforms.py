"""Which platforms delivery talks to, built from `platforms.<name>` settings.

Credentials come only from environment variables the settings name (`token_env`,
`secret_env`); every `api_url` can be pointed elsewhere (fakes in tests, proxies,
self-hosted Bot API servers). A platform whose credential is missing is skipped with a
warning rather than failing the service.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import structlog

from agentstream.config import Settings, ToolProgress
from agentstream.config.delivery import PlatformSettings
from agentstream.secrets_mask import mask_url
from agentstream_delivery.adapters import (
    DiscordAdapter,
    PlatformAdapter,
    SignalAdapter,
    SlackAdapter,
    TelegramAdapter,
    WebhookAdapter,
    capabilities_of,
)
from agentstream_delivery.adapters.http import HttpAdapter
from agentstream_delivery.consumer import Cadence
from agentstream_delivery.delivering import DEFAULT_LATE_LANDING_S

LATE_LANDING_MARGIN_S = 5.0  # how long after its client gave up a platform may still apply a request

DEFAULT_ENV = {
    "telegram": "TELEGRAM_BOT_TOKEN",
    "slack": "SLACK_BOT_TOKEN",
    "discord": "DISCORD_BOT_TOKEN",
    "signal": "SIGNAL_ACCOUNT",
    "webhook": "AGENTSTREAM_WEBHOOK_SECRET",
}


def _secret(conf: PlatformSettings, name: str, field: str = "token_env") -> str | None:
    env = getattr(conf, field) or DEFAULT_ENV[name]
    return os.environ.get(env) or None


def _build(name: str, conf: PlatformSettings) -> PlatformAdapter | None:
    kw: dict[str, Any] = {"api_url": conf.api_url} if conf.api_url else {}
    if conf.timeout_s is not None:
        kw["timeout"] = conf.timeout_s
    builders: dict[str, Callable[[], PlatformAdapter | None]] = {
        "telegram": lambda: (t := _secret(conf, name)) and TelegramAdapter(t, **kw),
        "slack": lambda: (t := _secret(conf, name)) and SlackAdapter(t, **kw),
        "discord": lambda: (t := _secret(conf, name)) and DiscordAdapter(t, **kw),
        "signal": lambda: (n := conf.account or _secret(conf, name)) and SignalAdapter(n, **kw),
        "webhook": lambda: (
            (s := _secret(conf, name, "secret_env"))
            and conf.api_url
            and WebhookAdapter(conf.api_url, s, **{k: v for k, v in kw.items() if k != "api_url"})
        ),
    }
    build = builders.get(name)
    return build() if build is not None else None


def build_adapters(settings: Settings, log: structlog.stdlib.BoundLogger) -> list[PlatformAdapter]:
    adapters = []
    for name, conf in settings.platforms.items():
        if not conf.enabled or name not in DEFAULT_ENV:
            continue
        adapter = _build(name, conf)
        if adapter is None:
            log.warning("platform configured without its credential or url; skipped", platform=name)
            continue
        adapter = _with_overrides(adapter, conf)
        endpoint = mask_url(adapter.endpoint) if isinstance(adapter, HttpAdapter) else None
        log.info("platform ready", platform=name, endpoint=endpoint)
        adapters.append(adapter)
    return adapters


def _with_overrides(adapter: PlatformAdapter, conf: PlatformSettings) -> PlatformAdapter:
    caps = capabilities_of(adapter)
    changes = {
        k: v
        for k, v in {
            "max_length": conf.max_length,
            "edit_interval": conf.edit_interval,
            "buffer_threshold": conf.buffer_threshold,
            "tool_progress": conf.tool_progress,
            "chat_interval": conf.chat_interval,
            "draft_streaming": conf.drafts if isinstance(adapter, TelegramAdapter) else None,
        }.items()
        if v is not None
    }
    if changes and hasattr(adapter, "capabilities"):
        adapter.capabilities = replace(caps, **changes)  # type: ignore[misc]
    return adapter


def cadence_for(adapter: PlatformAdapter, conf: PlatformSettings | None) -> Cadence:
    caps = capabilities_of(adapter)
    interval = conf.edit_interval if conf is not None and conf.edit_interval else caps.edit_interval
    return Cadence(
        edit_interval=interval,
        can_edit=caps.can_edit,
        buffer_threshold=caps.buffer_threshold,
        max_length=caps.max_length,
        measure=caps.measure,
        tool_progress=caps.tool_progress if caps.can_edit else ToolProgress.OFF,
    )


def chat_interval(adapter: PlatformAdapter) -> float:
    return capabilities_of(adapter).chat_interval


def late_landing(adapter: PlatformAdapter, conf: PlatformSettings | None) -> float:
    """How long a call of unknown outcome may still land: `late_landing_s`, else the client timeout + a margin."""
    if conf is not None and conf.late_landing_s is not None:
        return conf.late_landing_s
    timeout = getattr(adapter, "timeout", None)
    return DEFAULT_LATE_LANDING_S if timeout is None else float(timeout) + LATE_LANDING_MARGIN_S
