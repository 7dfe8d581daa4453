"""Shared pieces of the whole-stack tests."""

from __future__ import annotations

import asyncio
import uuid

import httpx

from agentstream.contracts import InboundMessage, User
from agentstream_testing.fixtures import ADMIN_HEADERS

DEMO_ANSWER = "6*7 = 42"


def inbound(text: str = "calculate 6*7", chat: str | None = None, platform: str = "memory") -> InboundMessage:
    return InboundMessage(
        id=str(uuid.uuid4()),
        platform=platform,
        chat_id=chat or f"chat-{uuid.uuid4().hex[:6]}",
        user=User(id="u-1", name="Tester"),
        text=text,
    )


async def poll_json(url: str, ready, timeout: float = 30.0):
    """GET `url` until `ready(json)` is truthy; returns the json."""
    last = None
    # One slow answer (a loaded machine, the whole stack in this event loop) is waited for: only the
    # overall `timeout` bounds the wait.
    async with httpx.AsyncClient(timeout=timeout, headers=ADMIN_HEADERS) as http, asyncio.timeout(timeout):
        while True:
            resp = await http.get(url)
            if resp.status_code == 200:
                last = resp.json()
                if ready(last):
                    return last
            await asyncio.sleep(0.1)
