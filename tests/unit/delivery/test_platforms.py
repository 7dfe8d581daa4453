"""The platforms delivery talks to, built from `platforms.<name>` settings through `PLATFORMS`."""

from __future__ import annotations

import httpx
import pytest
import structlog
from structlog.testing import capture_logs

from agentstream.config import ConfigError, TextFormat, load_settings
from agentstream.contracts import FinishReason, KnownPlatform, RunStatus
from agentstream_delivery.adapters import SignalAdapter, TelegramAdapter, WebhookAdapter
from agentstream_delivery.adapters.telegram import CAPABILITIES as TELEGRAM
from agentstream_delivery.platforms import IN_PROCESS, PLATFORMS, Adapters, build_adapters, late_landing
from agentstream_delivery.render import DEFAULT_TEXTS

LOG = structlog.get_logger("test")


def test_a_platform_is_built_with_the_credential_its_settings_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TG", "123:abc")
    settings = load_settings(platforms={"telegram": {"token_env": "MY_TG", "api_url": "http://tg.local"}})
    [adapter] = build_adapters(settings, LOG)
    assert isinstance(adapter, TelegramAdapter)
    assert adapter.bot == "123" and adapter.endpoint == "http://tg.local/bot123:abc"


def test_a_platform_without_its_credential_or_required_url_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    monkeypatch.setenv("AGENTSTREAM_WEBHOOK_SECRET", "s3cret")
    settings = load_settings(platforms={"telegram": {}, "webhook": {}})  # webhook: no api_url
    assert build_adapters(settings, LOG) == []


def test_every_known_platform_has_an_adapter_in_the_registry_or_inside_delivery() -> None:
    assert set(PLATFORMS) | IN_PROCESS == set(KnownPlatform)
    assert not set(PLATFORMS) & IN_PROCESS


def test_a_configured_platform_delivery_has_no_adapter_for_is_skipped_with_a_warning() -> None:
    settings = load_settings(platforms={"matrix": {}, "memory": {}})
    with capture_logs() as logs:
        assert build_adapters(settings, structlog.get_logger("test")) == []
    assert [(entry["log_level"], entry.get("platform")) for entry in logs] == [("warning", "matrix")]


def test_signal_takes_its_account_from_the_settings_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIGNAL_ACCOUNT", "+1000")
    adapter = PLATFORMS["signal"].build(load_settings(platforms={"signal": {"account": "+4999"}}).platforms["signal"])
    assert isinstance(adapter, SignalAdapter) and adapter.number == "+4999"


def test_webhook_is_built_with_its_secret_and_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_KEY", "k")
    conf = load_settings(platforms={"webhook": {"secret_env": "HOOK_KEY", "api_url": "http://h/in"}}).platforms
    adapter = PLATFORMS["webhook"].build(conf["webhook"])
    assert isinstance(adapter, WebhookAdapter) and (adapter.secret, adapter.api_url) == ("k", "http://h/in")


def test_settings_override_the_adapters_capabilities_and_unset_ones_keep_its_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:x")
    settings = load_settings(
        platforms={"telegram": {"edit_interval": 2.5, "drafts": False}, "memory": {"max_length": 100}}
    )
    adapters = Adapters.build(settings, LOG)
    telegram = adapters.enabled["telegram"].capabilities
    assert (telegram.edit_interval, telegram.draft_streaming) == (2.5, False)
    assert (telegram.max_length, telegram.measure, telegram.chat_interval) == (4096, "utf16", TELEGRAM.chat_interval)
    assert adapters.memory.capabilities.max_length == 100
    assert adapters.enabled["memory"] is adapters.memory and "console" in adapters.enabled


def test_each_platform_says_its_markup_in_its_capabilities_and_settings_override_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:x")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "d")
    settings = load_settings(
        platforms={"telegram": {}, "slack": {"formatting": "plain"}, "discord": {}, "signal": {"account": "+1"}}
    )
    formats = {name: a.capabilities.formatting for name, a in Adapters.build(settings, LOG).enabled.items()}
    assert formats == {
        "memory": TextFormat.MARKDOWN,
        "console": TextFormat.MARKDOWN,
        "web": TextFormat.HTML,
        "telegram": TextFormat.TELEGRAM_HTML,
        "slack": TextFormat.PLAIN,
        "discord": TextFormat.DISCORD_MARKDOWN,
        "signal": TextFormat.PLAIN,
    }


def test_a_disabled_in_process_platform_is_not_delivered_to_but_still_exists() -> None:
    adapters = Adapters.build(load_settings(platforms={"web": {"enabled": False}}), LOG)
    assert "web" not in adapters.enabled and adapters.web is not None


def test_late_landing_is_the_client_timeout_plus_a_margin_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:x")
    conf = load_settings(platforms={"telegram": {"timeout_s": 4}}).platforms["telegram"]
    adapter = PLATFORMS["telegram"].build(conf)
    assert adapter is not None and late_landing(adapter, conf) == 9.0
    assert late_landing(adapter, conf.model_copy(update={"late_landing_s": 30.0})) == 30.0


def test_the_platform_http_timeout_is_the_adapters_client_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:x")
    default = PLATFORMS["telegram"].build(load_settings(platforms={"telegram": {}}).platforms["telegram"])
    slow = PLATFORMS["telegram"].build(load_settings(platforms={"telegram": {"timeout_s": 2.5}}).platforms["telegram"])
    assert default is not None and default.client.timeout == httpx.Timeout(10.0)
    assert slow is not None and slow.client.timeout == httpx.Timeout(2.5) and slow.timeout == 2.5


def test_a_platforms_texts_reach_its_capabilities_and_unset_ones_keep_the_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:x")
    texts = {"stopped": "⏹ arrêté", "tool_line_prefix": "⚙ ", "failure_prefix": "Échec : "}
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    settings = load_settings(platforms={"telegram": {"texts": texts}, "slack": {}})
    adapters = Adapters.build(settings, LOG).enabled
    french = adapters["telegram"].capabilities.texts
    assert french.tool_line(("search", "fetch")) == "⚙ search → fetch …"
    assert french.ending(RunStatus.INTERRUPTED, FinishReason.USER, None).marker == " ⏹ arrêté"
    assert french.ending(RunStatus.FAILED, FinishReason.ERROR, "boom").notice == "Échec : boom"
    assert french.endings == DEFAULT_TEXTS.endings  # not configured: the defaults
    assert adapters["slack"].capabilities.texts == DEFAULT_TEXTS
    assert settings.platforms["telegram"].texts.shutdown == DEFAULT_TEXTS.endings[FinishReason.SHUTDOWN]


def test_an_empty_ending_text_is_refused_with_its_key_path() -> None:
    with pytest.raises(ConfigError, match=r"platforms\.telegram\.texts\.stopped"):
        load_settings(platforms={"telegram": {"texts": {"stopped": ""}}})


def test_a_prefix_the_web_page_recognises_texts_by_cannot_be_empty() -> None:
    for key in ("tool_line_prefix", "failure_prefix"):
        with pytest.raises(ConfigError, match=rf"platforms\.web\.texts\.{key}"):
            load_settings(platforms={"web": {"texts": {key: ""}}})
