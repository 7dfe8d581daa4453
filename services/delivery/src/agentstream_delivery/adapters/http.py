"""What the HTTP platform adapters share: one httpx client, transport errors classified.

A connection that could not be opened never reached the platform (`Transient`, safe
to retry). A timeout or a broken connection after the request went out may have
landed (`OutcomeUnknown`): the caller records it and never resends a message blindly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import httpx

from agentstream.config import TextFormat
from agentstream.contracts import ReplyTarget
from agentstream_delivery.adapters.base import (
    AdapterError,
    BadFormat,
    Capabilities,
    Forbidden,
    NotFound,
    OutcomeUnknown,
    RateLimited,
    Transient,
)

DEFAULT_TIMEOUT_S = 10.0


class HttpAdapter(ABC):
    platform = "http"
    capabilities = Capabilities()

    def __init__(
        self,
        api_url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        bot: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.bot = bot  # the rate-limit budget is per (bot, chat)
        self.timeout: float | None = timeout  # past it a call's outcome is unknown (the late-landing window)
        self.client = httpx.AsyncClient(timeout=timeout, headers=headers)

    @property
    def endpoint(self) -> str:
        """Where the platform's API calls go (may carry a credential: log it through `mask_url`)."""
        return self.api_url

    @abstractmethod
    async def send(
        self, target: ReplyTarget, text: str, *, final: bool = False, markup: TextFormat = TextFormat.PLAIN
    ) -> str: ...

    @abstractmethod
    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None: ...

    async def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        try:
            return await self.client.request(method, url, **kw)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as err:
            raise Transient(f"{self.platform}: cannot connect: {err!r}") from err
        except (httpx.TimeoutException, httpx.TransportError) as err:
            raise OutcomeUnknown(f"{self.platform}: no answer: {err!r}") from err

    async def close(self) -> None:
        await self.client.aclose()


class BotTokenHttpAdapter(HttpAdapter):
    """A platform that takes its bot token in the `Authorization` header (Slack, Discord)."""

    auth_scheme: str = "Bearer"  # RFC 6750's, which most platforms use (Discord: `Bot`)
    default_api_url: str

    def __init__(self, token: str, api_url: str | None = None, **kw: Any) -> None:
        # The token's tail names the bot (the rate-limit budget is per bot) without holding the secret.
        bot, headers = token[-8:], {"Authorization": f"{self.auth_scheme} {token}"}
        super().__init__(api_url or self.default_api_url, bot=bot, headers=headers, **kw)


class SendOnlyHttpAdapter(HttpAdapter):
    """A platform whose messages cannot be edited (`can_edit=False`): the stream only ever sends
    final texts there, so an edit reaching the adapter is refused rather than faked."""

    async def edit(
        self,
        target: ReplyTarget,
        message_id: str,
        text: str,
        *,
        final: bool = False,
        markup: TextFormat = TextFormat.PLAIN,
    ) -> None:
        raise AdapterError(f"{self.platform} messages cannot be edited")


def by_status(status: int, message: str) -> AdapterError:
    """The error class of an HTTP status when the body says nothing more specific."""
    if status in (401, 403):
        return Forbidden(message)
    if status == 404:
        return NotFound(message)
    if status >= 500:
        return Transient(message)
    return BadFormat(message)


def raise_if_rate_limited(resp: httpx.Response, message: str) -> None:
    """A 429 whose wait is in the `Retry-After` header (Slack, signal-cli, webhooks)."""
    if resp.status_code == 429:
        raise RateLimited(float(resp.headers.get("Retry-After", "1")), message)
