"""The webhook observer's errors are logged: the credential in its URL is masked in them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentstream.config.delivery import WebhookHookSettings
from agentstream.contracts.hook_events import SessionData
from agentstream.kafka import free_port
from agentstream_delivery.hooks.events import HookEvent
from agentstream_delivery.hooks.webhook import WebhookDeliveryError, WebhookHook

TOKEN = "hook-token-0a9b8c7d"


async def test_unreachable_webhook_error_masks_the_url_token() -> None:
    url = f"http://127.0.0.1:{free_port()}/hook?token={TOKEN}&board=7"  # nothing listens there
    hook = WebhookHook(WebhookHookSettings(url=url, attempts=1, timeout_s=2))
    event = HookEvent(
        point="session:start",
        event_id="e1",
        conversation_key="web:c",
        ts=datetime.now(UTC),
        data=SessionData(session_id="s1"),
    )
    with pytest.raises(WebhookDeliveryError) as err:
        await hook(event)
    await hook.close()
    assert TOKEN not in str(err.value)
    assert "/hook?token=***&board=7 unreachable after 1 attempts" in str(err.value)
