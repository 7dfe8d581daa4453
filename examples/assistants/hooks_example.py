"""Example hooks for `helper.yaml`. Both functions are optional.

`create` runs before the model call; `next` after it (and its tool calls).
Return None for "no change", or a dict with the keys documented in
agentstream_runner.hooks (CreateResult / NextResult).
"""

from __future__ import annotations

from typing import Any


def create(inp: Any) -> dict[str, Any] | None:
    # Questions starting with "summarize:" go straight to the summarizer assistant.
    last = inp.messages[-1].content if inp.messages else ""
    if last.lower().startswith("summarize:"):
        return {"delegate": {"assistant": "summarizer"}}
    return None


def next(inp: Any) -> dict[str, Any] | None:  # noqa: A001 - the hook's documented name
    # Attach how many tools ran to the run's result (RunFinished.data).
    return {"data": {"tool_results": len(inp.tool_results)}} if inp.tool_results else None
