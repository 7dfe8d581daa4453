"""Where hooks come from: built-ins enabled in config, Python modules named in config,
and the `agentstream.hooks` entry point group.

A module target is `pkg.mod` (its `register(registry)` is called, or else every function
marked with `@observer`/`@transform` is taken) or `pkg.mod:name` (one function; a
`@transform` function is a transform, anything else an observer of its declared points,
default all). An entry point loads the same kinds of object.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import structlog

from agentstream_delivery.hooks.base import ObserverFn, ObserverHook, TransformFn, TransformHook

ENTRY_POINT_GROUP = "agentstream.hooks"


class HookLoadError(Exception):
    """A configured hook module or entry point could not be loaded."""


class HookRegistry:
    def __init__(self, log: structlog.stdlib.BoundLogger | None = None) -> None:
        self.observers: list[ObserverHook] = []
        self.transforms: list[TransformHook] = []
        self.log = log or structlog.get_logger("agentstream.hooks")

    def add_observer(
        self,
        fn: ObserverFn,
        *,
        name: str | None = None,
        points: tuple[str, ...] | list[str] = ("*",),
        durable: bool = False,
    ) -> None:
        self.observers.append(ObserverHook(name or _name_of(fn), fn, tuple(points), durable))

    def add_transform(self, fn: TransformFn, *, name: str | None = None) -> None:
        self.transforms.append(TransformHook(name or _name_of(fn), fn))

    def add(self, hook: ObserverHook | TransformHook) -> None:
        if isinstance(hook, ObserverHook):
            self.observers.append(hook)
        else:
            self.transforms.append(hook)

    # -- loading ----------------------------------------------------------------------
    def load(self, target: str) -> None:
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
            obj: Any = getattr(module, attr) if attr else module
        except (ImportError, AttributeError) as err:
            raise HookLoadError(f"hook {target!r} cannot be loaded: {err}") from err
        self.load_object(obj, target)

    def load_object(self, obj: Any, origin: str) -> None:
        if isinstance(obj, ModuleType):
            register = getattr(obj, "register", None)
            if callable(register):
                register(self)
                return
            marked = [f for _, f in inspect.getmembers(obj, callable) if _is_marked(f)]
            if not marked:
                raise HookLoadError(f"hook module {origin!r} has no register() and no @observer/@transform functions")
            for fn in marked:
                self._add_function(fn)
            return
        if callable(obj):
            self._add_function(obj)
            return
        raise HookLoadError(f"hook {origin!r} is neither a module nor a callable")

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        for ep in entry_points(group=group):
            try:
                self.load_object(ep.load(), f"entry point {ep.name}")
            except Exception:  # one broken plugin must not keep delivery from starting
                self.log.exception("hook entry point failed to load", entry_point=ep.name)

    def _add_function(self, fn: Callable[..., Any]) -> None:
        if getattr(fn, "hook_transform", False):
            self.add_transform(fn)
        else:
            self.add_observer(
                fn, points=getattr(fn, "hook_points", ("*",)), durable=bool(getattr(fn, "hook_durable", False))
            )


def _is_marked(fn: Any) -> bool:
    return bool(getattr(fn, "hook_transform", False) or getattr(fn, "hook_points", None))


def _name_of(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name
