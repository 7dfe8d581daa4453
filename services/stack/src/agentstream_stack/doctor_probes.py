"""`agentstream doctor`'s questions to model servers and chat platforms: one cheap, read-only
request each that only answers when the address and the credential are right.

Model servers list their models (`GET /models`); a configured model the server does not list
fails the check. Platforms are asked who the bot is (Telegram `getMe`, Slack `auth.test`,
Discord `GET /users/@me`), Signal which accounts it has registered; a webhook receiver, which
checks our signature rather than a credential of its own, only whether it answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, assert_never

import httpx

from agentstream.config.delivery import PlatformSettings
from agentstream.config.runner import ConnectorSettings, ConnectorType
from agentstream.contracts import KnownPlatform
from agentstream.secrets_mask import mask_url

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


class CheckFailed(Exception):
    """A check's negative answer, in words for its verdict line."""


class NotApplicable(Exception):
    """Nothing to check (e.g. an in-process platform); the reason is the verdict's detail."""


async def probe_connector(conf: ConnectorSettings, timeout_s: float) -> str:
    if conf.type == ConnectorType.SCRIPTED:
        if conf.script and not Path(conf.script).is_file():  # noqa: ASYNC240 - one stat
            raise CheckFailed(f"script {conf.script} not found")
        return "scripted model, offline (nothing to reach)"
    key = conf.api_key()
    if conf.api_key_env and not key:
        raise CheckFailed(f"env {conf.api_key_env} (api_key_env) is not set")
    if conf.type == ConnectorType.ANTHROPIC:
        url = f"{(conf.base_url or ANTHROPIC_DEFAULT_URL).rstrip('/')}/v1/models"
        headers = {"anthropic-version": ANTHROPIC_VERSION, **({"x-api-key": key} if key else {})}
    elif conf.type == ConnectorType.OPENAI:
        url = f"{(conf.base_url or OPENAI_DEFAULT_URL).rstrip('/')}/models"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
    else:
        assert_never(conf.type)  # a new connector kind needs its own probe here
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        resp = await http.get(url, headers=headers)
    where = mask_url(url)
    if resp.status_code in (401, 403):
        raise CheckFailed(f"{where} refused the API key ({resp.status_code})")
    if resp.status_code != 200:
        raise CheckFailed(f"{where} answered {resp.status_code}")
    models = _model_ids(resp)
    if conf.model and models is not None and conf.model not in models:
        raise CheckFailed(f"{where} does not serve model {conf.model!r} (it lists {len(models)})")
    return f"{where} answers" + (f", serves {conf.model}" if conf.model else "")


def _model_ids(resp: httpx.Response) -> set[str] | None:
    try:
        return {str(m["id"]) for m in resp.json()["data"]}
    except (ValueError, KeyError, TypeError):
        return None  # an answer without the list: reachable, the model unknown


async def probe_platform(name: str, conf: PlatformSettings, timeout_s: float) -> str:
    from agentstream_delivery.platforms import PLATFORMS

    platform = PLATFORMS.get(name)
    if platform is None:
        raise NotApplicable("in-process (nothing to reach)")
    probe = PROBES[name]
    if platform.credential(conf) is None:
        env = getattr(conf, platform.credential_setting) or platform.credential_env
        raise CheckFailed(f"credential missing: env {env} is not set (delivery skips this platform)")
    adapter = platform.build(conf)
    if adapter is None:
        raise CheckFailed(f"platforms.{name}.api_url is required")
    adapter.client.timeout = httpx.Timeout(timeout_s)
    try:
        return f"{mask_url(adapter.api_url)}: {await probe(adapter)}"
    finally:
        await adapter.close()


def _json(resp: httpx.Response) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def _bot(
    resp: httpx.Response, request: str, *, ok_flag: bool = False, error_field: str | None = None
) -> dict[str, Any]:
    """The body of a platform's answer to "who is the bot?"; anything else refuses the token.

    `ok_flag`: the platform also says `"ok": false` in a 200 (Telegram, Slack);
    `error_field`: where it says why, for the verdict (else the status stands for it).
    """
    body = _json(resp)
    if resp.status_code == 200 and isinstance(body, dict) and (body.get("ok") or not ok_flag):
        return body
    error = body.get(error_field) if error_field and isinstance(body, dict) else None
    raise CheckFailed(f"{request} refused the token ({error or resp.status_code})")


async def _telegram(adapter: Any) -> str:
    body = _bot(await adapter.client.post(f"{adapter.endpoint}/getMe", json={}), "getMe", ok_flag=True)
    return f"token valid (bot @{body['result'].get('username', '?')})"


async def _slack(adapter: Any) -> str:
    resp = await adapter.client.post(f"{adapter.api_url}/auth.test", json={})
    body = _bot(resp, "auth.test", ok_flag=True, error_field="error")
    return f"token valid (bot {body.get('user', '?')} in {body.get('team', '?')})"


async def _discord(adapter: Any) -> str:
    body = _bot(await adapter.client.get(f"{adapter.api_url}/users/@me"), "/users/@me")
    return f"token valid (bot {body.get('username', '?')})"


async def _signal(adapter: Any) -> str:
    resp = await adapter.client.get(f"{adapter.api_url}/v1/accounts")
    accounts = _json(resp)
    if resp.status_code != 200 or not isinstance(accounts, list):
        raise CheckFailed(f"/v1/accounts answered {resp.status_code}")
    if adapter.bot not in accounts:
        raise CheckFailed(f"account {adapter.bot} is not registered there")
    return f"account {adapter.bot} registered"


async def _webhook(adapter: Any) -> str:
    resp = await adapter.client.request("OPTIONS", adapter.api_url)
    if resp.status_code >= 500:
        raise CheckFailed(f"answered {resp.status_code}")
    return f"answers ({resp.status_code})"


PROBES: dict[str, Callable[[Any], Awaitable[str]]] = {
    KnownPlatform.TELEGRAM: _telegram,
    KnownPlatform.SLACK: _slack,
    KnownPlatform.DISCORD: _discord,
    KnownPlatform.SIGNAL: _signal,
    KnownPlatform.WEBHOOK: _webhook,
}
