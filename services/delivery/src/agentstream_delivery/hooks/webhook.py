"""The `webhook` observer: POST each lifecycle event as JSON to a URL (a kanban board, a CRM…).

Body: the `HookEvent` JSON. With `secret_env`, the header `X-Agentstream-Signature:
sha256=<hex HMAC-SHA256 of the body>` lets the receiver check the sender. Transport
errors and 5xx are retried (bounded, with backoff); 4xx are not (the receiver said no).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os

import httpx

from agentstream.config.delivery import WebhookHookSettings
from agentstream.secrets_mask import mask_url
from agentstream_delivery.hooks.base import ObserverHook
from agentstream_delivery.hooks.events import HookEvent

SIGNATURE_HEADER = "X-Agentstream-Signature"


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookDeliveryError(Exception):
    """The receiver did not accept the event after every attempt."""


class WebhookHook:
    def __init__(self, conf: WebhookHookSettings, index: int = 0, backoff_s: float = 0.2) -> None:
        self.conf = conf
        self.name = f"webhook[{index}]"
        self.backoff_s = backoff_s
        self._client: httpx.AsyncClient | None = None
        self._shown_url = mask_url(conf.url)  # errors are logged; the URL may carry a token

    def as_observer(self) -> ObserverHook:
        return ObserverHook(self.name, self, points=tuple(self.conf.points))

    async def __call__(self, event: HookEvent) -> None:
        body = event.model_dump_json().encode()
        headers = {"content-type": "application/json", "X-Agentstream-Point": event.point}
        secret = os.environ.get(self.conf.secret_env) if self.conf.secret_env else None
        if secret:
            headers[SIGNATURE_HEADER] = sign(secret, body)
        client = self._client or httpx.AsyncClient(timeout=self.conf.timeout_s)
        self._client = client
        last: str = ""
        for attempt in range(1, self.conf.attempts + 1):
            try:
                response = await client.post(self.conf.url, content=body, headers=headers)
            except httpx.HTTPError as err:
                last = repr(err)
            else:
                if response.status_code < 500:
                    if response.status_code >= 400:
                        raise WebhookDeliveryError(f"{self._shown_url} refused the event: {response.status_code}")
                    return
                last = f"HTTP {response.status_code}"
            if attempt < self.conf.attempts:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        raise WebhookDeliveryError(f"{self._shown_url} unreachable after {self.conf.attempts} attempts: {last}")

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
