"""Inline transforms of outgoing text: the configured hooks, then the security filter.

Order is fixed: user transforms first (config order), security last, so no transform
can put a secret back. A user transform that raises or overruns the budget leaves the
text as it was; the security filter fails *closed* (see `security.fail_closed`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from agentstream_delivery.hooks.base import TransformContext, TransformHook, call_within
from agentstream_delivery.hooks.metrics import HookMetrics
from agentstream_delivery.hooks.security import WITHHELD, SecurityFilter, fail_closed


@dataclass(eq=False)
class TransformChain:
    hooks: list[TransformHook]
    security: SecurityFilter | None
    metrics: HookMetrics
    log: structlog.stdlib.BoundLogger
    budget_s: float = 0.2

    @property
    def empty(self) -> bool:
        return not self.hooks and self.security is None

    async def __call__(self, text: str, ctx: TransformContext) -> str:
        for hook in self.hooks:
            text = await self._user_transform(hook, text, ctx)
        if self.security is not None:
            text = await self._secure(self.security, text, ctx)
        return text

    async def _user_transform(self, hook: TransformHook, text: str, ctx: TransformContext) -> str:
        started = time.perf_counter()
        outcome = "ok"
        try:
            result = await call_within(hook.fn, text, ctx, budget_s=self.budget_s)
            if not isinstance(result, str):
                raise TypeError(f"transform returned {type(result).__name__}, not str")
            return result
        except TimeoutError:
            outcome = "timeout"
            self.log.warning("transform hook timed out; text unchanged", hook=hook.name, budget_s=self.budget_s)
        except Exception:
            outcome = "error"
            self.log.exception("transform hook failed; text unchanged", hook=hook.name)
        finally:
            self.metrics.calls.labels(hook.name, "transform", outcome).inc()
            self.metrics.duration.labels(hook.name, "transform").observe(time.perf_counter() - started)
        return text

    async def _secure(self, security: SecurityFilter, text: str, ctx: TransformContext) -> str:
        outcome = "ok"
        try:
            # Inline (no thread): our own linear regexes, and a hung filter must not leave
            # threads behind; an error or exception fails closed below.
            return security.redact(text, final=ctx.final)
        except Exception:
            outcome = "error"
            self.log.exception("security filter failed; failing closed", platform=ctx.platform)
            closed = fail_closed(text, security.redactor.mask)
            self.metrics.fail_closed.labels("withheld" if closed == WITHHELD else "redacted").inc()
            return closed
        finally:
            self.metrics.calls.labels("security", "transform", outcome).inc()
