"""Receive hooks (and the `command:<name>` hooks of slash commands): Python callables named in the config.

A hook is `module:function` taking the `InboundMessage` (command hooks also get the
`Command`) and returning None (carry on) or one of `Deny`, `Rewrite`, `Handled`.
It may be sync or async. A hook that raises is logged and treated as None: a broken
hook must not take the front door down.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentstream.contracts import InboundMessage


@dataclass(frozen=True)
class Deny:
    """Refuse the message; `text` is told to the user."""

    text: str


@dataclass(frozen=True)
class Rewrite:
    """Carry on with this text instead."""

    text: str


@dataclass(frozen=True)
class Handled:
    """The hook dealt with it: no run; `reply` (if any) is told to the user."""

    reply: str | None = None


HookResult = Deny | Rewrite | Handled | None
Hook = Callable[..., Any]


class HookError(ValueError):
    """A hook named in the config cannot be loaded."""


def load_hook(path: str) -> Hook:
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise HookError(f"hook {path!r}: expected 'module:function'")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise HookError(f"hook {path!r}: {err}") from None
    if not callable(fn):
        raise HookError(f"hook {path!r} is not callable")
    return fn  # type: ignore[no-any-return]


async def call_hook(hook: Hook, *args: Any) -> HookResult:
    result = hook(*args)
    if inspect.isawaitable(result):
        result = await result
    if result is None or isinstance(result, Deny | Rewrite | Handled):
        return result
    raise TypeError(f"hook {getattr(hook, '__name__', hook)!r} returned {type(result).__name__}")


def rewritten(msg: InboundMessage, text: str) -> InboundMessage:
    return msg.model_copy(update={"text": text})
