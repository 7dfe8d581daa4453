"""Delivery's HTTP routes: open streams (debugging) and the in-memory platform's chats."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from agentstream_delivery.adapters import MemoryAdapter
from agentstream_delivery.streams import StreamRegistry


def add_routes(app: FastAPI, streams: StreamRegistry, memory: MemoryAdapter) -> None:
    @app.get("/v1/streams", tags=["delivery"])
    async def open_streams() -> dict[str, Any]:
        return {"streams": [actor.describe() for actor in streams.all()]}

    @app.get("/v1/memory/chats/{chat_id}", tags=["delivery"])
    async def memory_chat(chat_id: str) -> dict[str, Any]:
        """What the in-memory platform shows in one chat (for tests running delivery elsewhere)."""
        return {"chat_id": chat_id, "messages": [m.to_json() for m in memory.messages(chat_id)]}
