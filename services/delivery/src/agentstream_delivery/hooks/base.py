"""The two kinds of hook and how they are called.

- observer: `hook(event: HookEvent) -> None` (sync or async). Runs off the delivery
  path, on its own worker with a bounded queue; it cannot slow a stream.
- transform: `hook(text: str, ctx: TransformContext) -> str` (sync or async). Runs
  inline before every platform send or edit, on the *whole* frame text, within a
  time budget; on timeout or error the text passes through unchanged.

Both are isolated: whatever a hook raises is logged and counted, never propagated.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agentstream_delivery.hooks.events import HookEvent

# The service's database sessions (`Infra.sessions`): built up front, no connection until the first query.
SessionSource = async_sessionmaker[AsyncSession]
ObserverFn = Callable[[HookEvent], Awaitable[None] | None]
TransformFn = Callable[[str, "TransformContext"], Awaitable[str] | str]


@dataclass(frozen=True)
class TransformContext:
    """Where the text is going: transforms may treat previews and finals differently."""

    platform: str
    chat_id: str
    root_run_id: str | None = None
    segment: int = 0
    final: bool = True


@dataclass(frozen=True)
class ObserverHook:
    name: str
    fn: ObserverFn
    points: tuple[str, ...] = ("*",)
    durable: bool = False  # True: a full queue applies back-pressure (hooks consumer only) instead of dropping


@dataclass(frozen=True)
class TransformHook:
    name: str
    fn: TransformFn


async def call_within(fn: Callable[..., Any], *args: Any, budget_s: float) -> Any:
    """Call a sync or async hook with a time budget (TimeoutError when it is exceeded).

    Sync hooks run in a worker thread so the budget holds even for a hook that blocks;
    a thread that overruns is abandoned (it finishes on its own, its result is dropped).
    """
    async with asyncio.timeout(budget_s):
        if is_async(fn):
            return await fn(*args)
        result = await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(result):
            return await result
        return result


def is_async(fn: Callable[..., Any]) -> bool:
    """A coroutine function, or an object whose `__call__` is one (hook classes)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def observer(*points: str, durable: bool = False) -> Callable[[ObserverFn], ObserverFn]:
    """Decorator for hook modules: `@observer("agent:end")` declares the points a function observes."""

    def mark(fn: ObserverFn) -> ObserverFn:
        fn.hook_points = points or ("*",)  # type: ignore[attr-defined]
        fn.hook_durable = durable  # type: ignore[attr-defined]
        return fn

    return mark


def transform(fn: TransformFn) -> TransformFn:
    """Decorator for hook modules: marks a function as a transform of outgoing text."""
    fn.hook_transform = True  # type: ignore[attr-defined]
    return fn
