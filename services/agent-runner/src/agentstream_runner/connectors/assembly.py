"""Streamed tool calls arrive in pieces; this puts them back together.

OpenAI-style deltas carry an `index` per call; the first piece of a call has its
id and name, later pieces append to its JSON arguments. Pure and provider-neutral.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentstream_runner.connectors.base import ToolCallChunk


@dataclass
class _Partial:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ToolCallAssembler:
    def __init__(self) -> None:
        self._calls: dict[int, _Partial] = {}

    def add(
        self, index: int, call_id: str | None = None, name: str | None = None, arguments: str | None = None
    ) -> None:
        call = self._calls.setdefault(index, _Partial())
        call.call_id = call.call_id or (call_id or "")
        call.name += name or ""
        if arguments:
            call.arguments.append(arguments)

    def calls(self) -> list[ToolCallChunk]:
        """The complete calls, in index order (ids filled in when a server omits them)."""
        return [
            ToolCallChunk(call_id=c.call_id or f"call_{i}", name=c.name, arguments="".join(c.arguments) or "{}")
            for i, c in sorted(self._calls.items())
        ]
