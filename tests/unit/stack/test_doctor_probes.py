"""`agentstream doctor`'s probes against real HTTP servers on 127.0.0.1 (the fake platforms and the
fake OpenAI server): a right credential passes, a wrong one fails, an unreachable address fails."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agentstream.config.delivery import PlatformSettings
from agentstream.config.runner import ConnectorSettings
from agentstream_delivery.platforms import PLATFORMS
from agentstream_stack.doctor import Verdict, _verdict
from agentstream_stack.doctor_probes import PROBES, CheckFailed, NotApplicable, probe_connector, probe_platform
from agentstream_testing.fake_openai import FakeOpenAI
from agentstream_testing.fake_platforms import FakeDiscord, FakePlatform, FakeSignal, FakeSlack, FakeTelegram
from agentstream_testing.fake_platforms.webhook import FakeWebhookReceiver

TIMEOUT_S = 5.0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Case:
    fake: Callable[[], FakePlatform]
    good: str  # the credential the fake accepts
    bad: str
    path: str = ""  # of the endpoint under the fake's url
    by_account: bool = False  # Signal: the credential is `account`, not an env var


CASES: dict[str, Case] = {
    "telegram": Case(FakeTelegram, "123:TEST", "123:WRONG"),
    "slack": Case(FakeSlack, "xoxb-test", "xoxb-wrong"),
    "discord": Case(FakeDiscord, "discord-test", "discord-wrong"),
    "signal": Case(FakeSignal, "+15550000000", "+15559999999", by_account=True),
}


def test_every_platform_delivery_knows_has_a_probe() -> None:
    assert set(PROBES) == set(PLATFORMS)


def conf_for(case: Case, url: str, credential: str, monkeypatch: pytest.MonkeyPatch) -> PlatformSettings:
    if case.by_account:
        return PlatformSettings(api_url=url, account=credential)
    monkeypatch.setenv("DOCTOR_TEST_TOKEN", credential)
    return PlatformSettings(api_url=url, token_env="DOCTOR_TEST_TOKEN")


@pytest.mark.parametrize("name", CASES)
async def test_a_platform_accepting_the_credential_passes(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    async with case.fake() as fake:
        detail = await probe_platform(name, conf_for(case, fake.url, case.good, monkeypatch), TIMEOUT_S)
    assert "valid" in detail or "registered" in detail


@pytest.mark.parametrize("name", CASES)
async def test_a_platform_refusing_the_credential_fails(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = CASES[name]
    async with case.fake() as fake:
        with pytest.raises(CheckFailed):
            await probe_platform(name, conf_for(case, fake.url, case.bad, monkeypatch), TIMEOUT_S)


async def test_a_missing_credential_fails_naming_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCTOR_UNSET_TOKEN", raising=False)
    with pytest.raises(CheckFailed, match="DOCTOR_UNSET_TOKEN"):
        await probe_platform("telegram", PlatformSettings(token_env="DOCTOR_UNSET_TOKEN"), TIMEOUT_S)


async def test_a_webhook_receiver_is_asked_whether_it_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCTOR_TEST_SECRET", "webhook-secret")
    async with FakeWebhookReceiver() as fake:
        conf = PlatformSettings(api_url=f"{fake.url}/hook", secret_env="DOCTOR_TEST_SECRET")
        assert "answers" in await probe_platform("webhook", conf, TIMEOUT_S)
    gone = PlatformSettings(api_url=f"http://127.0.0.1:{closed_port()}/hook", secret_env="DOCTOR_TEST_SECRET")
    result = await _verdict("platform webhook", lambda: probe_platform("webhook", gone, TIMEOUT_S), TIMEOUT_S)
    assert result.verdict is Verdict.FAIL and "ConnectError" in result.detail


async def test_in_process_platforms_are_skipped() -> None:
    with pytest.raises(NotApplicable):
        await probe_platform("web", PlatformSettings(), TIMEOUT_S)


def openai(url: str, **kw: Any) -> ConnectorSettings:
    return ConnectorSettings(id="m", type="openai", base_url=url, **kw)


async def test_a_model_server_serving_the_model_passes_and_one_without_it_fails() -> None:
    async with FakeOpenAI(model="served-model") as fake:
        assert "serves served-model" in await probe_connector(openai(fake.base_url, model="served-model"), TIMEOUT_S)
        with pytest.raises(CheckFailed, match="does not serve model 'other-model'"):
            await probe_connector(openai(fake.base_url, model="other-model"), TIMEOUT_S)


async def test_an_unreachable_model_server_fails() -> None:
    conf = openai(f"http://127.0.0.1:{closed_port()}/v1")
    result = await _verdict("connector m", lambda: probe_connector(conf, TIMEOUT_S), TIMEOUT_S)
    assert result.verdict is Verdict.FAIL and "ConnectError" in result.detail


async def test_an_unset_api_key_fails_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCTOR_UNSET_KEY", raising=False)
    conf = openai(f"http://127.0.0.1:{closed_port()}/v1", api_key_env="DOCTOR_UNSET_KEY")
    with pytest.raises(CheckFailed, match="DOCTOR_UNSET_KEY"):
        await probe_connector(conf, TIMEOUT_S)


async def test_the_scripted_model_needs_nothing() -> None:
    assert "offline" in await probe_connector(ConnectorSettings(id="demo", type="scripted"), TIMEOUT_S)
