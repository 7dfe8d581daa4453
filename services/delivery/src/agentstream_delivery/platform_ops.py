"""What the stream state machine asks the I/O side to do: post or edit one platform message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OpRole = Literal["text", "progress", "notice"]


@dataclass(frozen=True)
class PlatformOp:
    """One call on platform message number `segment` of the run (its ledger row)."""

    segment: int
    text: str
    final: bool
    role: OpRole = "text"


class Send(PlatformOp):
    """Post a new platform message; it becomes the run's platform message number `segment`."""


class Edit(PlatformOp):
    """Replace the text of platform message number `segment`."""


Op = Send | Edit


def coalesce(ops: list[Op]) -> list[Op]:
    """Ops computed together, reduced to what must reach the platform.

    A later op on the same platform message supersedes an earlier non-final one (only
    the newest frame matters); a superseded `Send` keeps its place and becomes a send
    of the newest text. Final ops are never dropped.
    """
    out: list[Op] = []
    for op in ops:
        prev = next((i for i, o in enumerate(out) if o.segment == op.segment and o.role == op.role), None)
        if prev is None or out[prev].final:
            out.append(op)
            continue
        earlier = out[prev]
        out[prev] = Send(op.segment, op.text, op.final, op.role) if isinstance(earlier, Send) else op
    return out
