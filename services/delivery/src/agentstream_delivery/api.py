"""Delivery's HTTP routes: open streams (debugging) and the in-memory platform's chats (operators: `admin`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from agentstream.auth import AUTH_RESPONSES, Principal, Scope, requires
from agentstream_delivery.adapters import MemoryAdapter
from agentstream_delivery.stream_actor import StreamRegistry


def add_routes(app: FastAPI, streams: StreamRegistry, memory: MemoryAdapter) -> None:
    @app.get("/v1/streams", tags=["delivery"], responses=AUTH_RESPONSES)
    async def open_streams(_: Principal = requires(Scope.ADMIN)) -> dict[str, Any]:
        return {"streams": [actor.describe() for actor in streams.all()]}

    @app.get("/v1/memory/chats/{chat_id}", tags=["delivery"], responses=AUTH_RESPONSES)
    async def memory_chat(chat_id: str, _: Principal = requires(Scope.ADMIN)) -> dict[str, Any]:
        """What the in-memory platform shows in one chat (for tests running delivery elsewhere)."""
        return {"chat_id": chat_id, "messages": [m.to_json() for m in memory.messages(chat_id)]}
