"""Lifecycle hooks of delivery: observers off the delivery path, transforms inline before a send.

Built-ins: `security` (transform, on by default), `billing`, `audit`, `webhook` (observers).
"""

from agentstream_delivery.hooks.base import (
    ObserverHook,
    TransformContext,
    TransformHook,
    observer,
    transform,
)
from agentstream_delivery.hooks.events import HookEvent, LifecycleMapper, matches
from agentstream_delivery.hooks.registry import ENTRY_POINT_GROUP, HookLoadError, HookRegistry
from agentstream_delivery.hooks.runtime import HookRuntime
from agentstream_delivery.hooks.security import SecurityFilter

__all__ = [
    "ENTRY_POINT_GROUP",
    "HookEvent",
    "HookLoadError",
    "HookRegistry",
    "HookRuntime",
    "LifecycleMapper",
    "ObserverHook",
    "SecurityFilter",
    "TransformContext",
    "TransformHook",
    "matches",
    "observer",
    "transform",
]
