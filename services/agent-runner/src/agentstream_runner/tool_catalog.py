"""The live tool catalogue: which tools some tool-executor serves now, read from `tool-catalog`.

Each executor publishes one `ToolCatalogEntry` per tool it serves, again every `heartbeat_s`,
and `available=false` when it stops serving one. The catalogue keeps the latest entry per
(tool, executor); an entry not renewed within 3 heartbeats is gone (its executor died), so a
tool exists while at least one executor's entry of it is live.

What the model is offered is the assistant's selection of the live tools. Built-ins are the
exception: every executor serves them and their specs are known here, so they are offered even
before any executor was heard from (a call waits in `tool-calls` until one answers). See
docs/tools.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from agentstream.contracts import ToolCatalogEntry
from agentstream.tools_catalog import BUILTIN_TOOL_SPECS, ToolSpec, selects, tool_spec


@dataclass(frozen=True)
class LiveEntry:
    entry: ToolCatalogEntry
    spec: ToolSpec
    expires_at: float  # on the `clock` of the catalogue


class ToolCatalog:
    def __init__(self, clock: Callable[[], float] = time.time, approval_selectors: Iterable[str] = ()) -> None:
        self._clock = clock  # wall clock: expiry is measured from the executor's `ts`
        # What this runner's own config says needs approval: in force before any executor is heard
        # from (built-ins are offered then), so the catalogue can only add to it, never lift it.
        self._configured_approval = tuple(approval_selectors)
        self._by_tool: dict[str, dict[str, LiveEntry]] = {}  # tool → executor id → its latest word
        # tool → executors whose latest word says it needs approval; kept past heartbeat expiry, so
        # an executor's silence never lifts it (only its `available=false` or a tombstone does).
        self._approval: dict[str, set[str]] = {}

    def apply(self, entry: ToolCatalogEntry) -> None:
        """One record of `tool-catalog`, in topic order."""
        executors = self._by_tool.setdefault(entry.tool, {})
        approving = self._approval.setdefault(entry.tool, set())
        if entry.available and entry.requires_approval:
            approving.add(entry.executor_id)
        else:
            approving.discard(entry.executor_id)
        if not approving:
            del self._approval[entry.tool]
        if not entry.available:
            executors.pop(entry.executor_id, None)
            if not executors:
                del self._by_tool[entry.tool]
            return
        # A record read long after it was written (the topic read from the beginning) counts from
        # when it was written; one stamped in the future (a skewed clock) from when it is read.
        since = min(entry.ts.timestamp(), self._clock())
        # The spec a runner knows itself wins: the model sees the same words whichever executor answers.
        spec = tool_spec(entry.tool) or ToolSpec(
            name=entry.tool, description=entry.description, parameters=entry.parameters
        )
        executors[entry.executor_id] = LiveEntry(entry, spec, since + entry.expires_after_s())

    def forget(self, tool: str) -> None:
        """A tombstone: the tool is gone, whoever served it."""
        self._by_tool.pop(tool, None)
        self._approval.pop(tool, None)

    def live(self) -> dict[str, ToolSpec]:
        """Every tool some executor serves now, by name."""
        now = self._clock()
        found: dict[str, ToolSpec] = {}
        for tool, executors in list(self._by_tool.items()):
            for executor_id, live in list(executors.items()):
                if live.expires_at <= now:
                    del executors[executor_id]
                else:
                    found[tool] = live.spec
            if not executors:
                del self._by_tool[tool]
        return found

    def executors(self, tool: str) -> set[str]:
        """The executors serving `tool` now."""
        now = self._clock()
        return {e for e, live in self._by_tool.get(tool, {}).items() if live.expires_at > now}

    def requires_approval(self, tool: str) -> bool:
        """Whether a call of `tool` waits for a person's approval: the config selects it, or some
        executor's latest entry says so."""
        return tool in self._approval or any(selects(s, tool) for s in self._configured_approval)

    def offered(self, selectors: Iterable[str]) -> tuple[ToolSpec, ...]:
        """The specs a model gets for an assistant's `tools` list: built-ins always, any other
        tool only while it is live; in the list's order, a `<source>__*` as its tools by name."""
        live = self.live()
        specs: dict[str, ToolSpec] = {}
        for selector in selectors:
            if selector in BUILTIN_TOOL_SPECS:
                specs.setdefault(selector, BUILTIN_TOOL_SPECS[selector])
            elif selector in live:
                specs.setdefault(selector, live[selector])
            else:
                for name in sorted(live):
                    if selects(selector, name):
                        specs.setdefault(name, live[name])
        return tuple(specs.values())
