"""Hook functions the runner tests point assistants at (`Hooks(create=..., next=...)`)."""

from __future__ import annotations

from typing import Any

from agentstream_runner.hooks import CreateInput, NextInput

SEEN: list[Any] = []


def create_sampling(inp: CreateInput) -> dict[str, Any]:
    SEEN.append(inp)
    return {"options": {"temperature": 0.1, "max_tokens": 33}}


async def create_connector(inp: CreateInput) -> dict[str, Any]:
    return {"connector": "plain"}


def create_delegate(inp: CreateInput) -> dict[str, Any]:
    return {"delegate": {"assistant": "child"}}


def create_replace_messages(inp: CreateInput) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": "replaced"}, {"role": "user", "content": "new question"}]}


def next_nothing(inp: NextInput) -> None:
    SEEN.append(inp)


def next_data(inp: NextInput) -> dict[str, Any]:
    return {"data": {"score": 7, "results": len(inp.tool_results)}}


def next_delegate(inp: NextInput) -> dict[str, Any]:
    return {"delegate": {"assistant": "child", "messages": [{"role": "user", "content": "child, please answer"}]}}


def next_raises(inp: NextInput) -> None:
    raise ValueError("hook exploded")


def create_cycle_back(inp: CreateInput) -> dict[str, Any]:
    return {"delegate": {"assistant": "parent"}}
