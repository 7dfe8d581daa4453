"""Assistant hooks: a Python module with optional `create` and `next` functions.

`create(CreateInput)` runs before the model call and may change the request or
delegate; `next(NextInput)` runs after the model call (and its tools) and may
attach data or delegate. Either may be sync or async and return a dict or the
typed result; nothing (None) means "no change". A module that does not define a
function simply has no such hook. A hook that raises fails the run with its error.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentstream.contracts import ChatMessage, StartRun, ToolCallResult, ToolCallSpec
from agentstream_runner.outcome import RunFailure

HookFn = Callable[..., Any]


class HookError(RunFailure):
    """A hook raised or returned something invalid; the run fails with this text."""


class Delegate(BaseModel):
    """Hand the answer to another assistant (a child run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    assistant: str
    messages: list[ChatMessage] | None = Field(default=None, description="The child's input; None = this input.")


class CreateResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    messages: list[ChatMessage] | None = None
    options: dict[str, Any] | None = Field(default=None, description="Sampling options, merged over the current.")
    connector: str | None = None
    tools: list[str] | None = None
    metadata: dict[str, Any] | None = None
    delegate: Delegate | None = None


class NextResult(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    data: dict[str, Any] | None = None
    delegate: Delegate | None = None


@dataclass(frozen=True)
class CreateInput:
    messages: list[ChatMessage]
    options: dict[str, Any]
    metadata: dict[str, Any]
    assistant_id: str
    start: StartRun


@dataclass(frozen=True)
class NextInput:
    messages: list[ChatMessage]
    text: str
    tool_calls: list[ToolCallSpec]
    tool_results: list[ToolCallResult] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class Hooks:
    create: HookFn | None = None
    next: HookFn | None = None


def _import(module_path: str, base_dir: Path | None) -> ModuleType:
    if module_path.endswith(".py"):
        path = Path(module_path)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        name = f"agentstream_hooks_{path.stem}_{abs(hash(str(path)))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(module_path)


def load_hooks(module_path: str | None, base_dir: Path | None = None) -> Hooks:
    """The module's `create`/`next` (each optional). Raises on an unimportable module."""
    if not module_path:
        return Hooks()
    module = _import(module_path, base_dir)
    create, nxt = getattr(module, "create", None), getattr(module, "next", None)
    for name, fn in (("create", create), ("next", nxt)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{module_path}.{name} is not callable")
    return Hooks(create=create, next=nxt)


async def _call(name: str, fn: HookFn, arg: Any) -> Any:
    try:
        result = fn(arg)
        return await result if inspect.isawaitable(result) else result
    except Exception as err:
        raise HookError(f"{name} hook failed: {type(err).__name__}: {err}") from err


async def call_create(fn: HookFn, arg: CreateInput) -> CreateResult:
    raw = await _call("create", fn, arg)
    try:
        return raw if isinstance(raw, CreateResult) else CreateResult.model_validate(raw or {})
    except ValidationError as err:
        raise HookError(f"create hook returned an invalid result: {err.errors()[0]['msg']}") from None


async def call_next(fn: HookFn, arg: NextInput) -> NextResult:
    raw = await _call("next", fn, arg)
    try:
        return raw if isinstance(raw, NextResult) else NextResult.model_validate(raw or {})
    except ValidationError as err:
        raise HookError(f"next hook returned an invalid result: {err.errors()[0]['msg']}") from None
