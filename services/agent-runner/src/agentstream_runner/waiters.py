"""Tool calls in flight: one future per (run_id, call_id), resolved by the
`tool-results` handler. Unknown or late results resolve nothing."""

from __future__ import annotations

import asyncio

from agentstream.contracts import ToolCallResult


class ToolWaiters:
    def __init__(self) -> None:
        self._futures: dict[tuple[str, str], asyncio.Future[ToolCallResult]] = {}

    def expect(self, run_id: str, call_id: str) -> asyncio.Future[ToolCallResult]:
        future: asyncio.Future[ToolCallResult] = asyncio.get_running_loop().create_future()
        self._futures[(run_id, call_id)] = future
        return future

    def resolve(self, result: ToolCallResult) -> bool:
        """True when a run was waiting for this result."""
        future = self._futures.pop((result.run_id, result.call_id), None)
        if future is None or future.done():
            return False
        future.set_result(result)
        return True

    def discard(self, run_id: str, call_id: str) -> None:
        future = self._futures.pop((run_id, call_id), None)
        if future is not None and not future.done():
            future.cancel()

    def __len__(self) -> int:
        return len(self._futures)
