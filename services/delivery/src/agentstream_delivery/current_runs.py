"""Which run of a conversation is current (pure bookkeeping).

Only the newest run of a conversation may still change what its chat shows. A newer
`run.started` on the conversation makes the older run stale (its stream is closed with
the stopped marker), and a finished run is over: late events of either (a runner that
has not yet noticed `/stop` or `/new`, a replay) are dropped instead of reopening or
extending anything. A resumed run keeps its root run id and continues its `seq`: its
`run.started` after the `run.finished` of the first attempt makes it current again.
Bounded memory: the oldest finished ids are forgotten first; a conversation's current
run is forgotten once it is over and the conversation has been idle (an open run stays).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Collection

from agentstream.bounded import DEFAULT_IDLE_TTL_S, BoundedMap
from agentstream.contracts import RunStarted

MAX_REMEMBERED = 10_000


class CurrentRuns:
    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self.limit = limit
        # conversation key → current root run id
        self._current: BoundedMap[str, str] = BoundedMap(limit, DEFAULT_IDLE_TTL_S, self._open)
        # finished/superseded root run → its last seq and its conversation
        self._over: OrderedDict[str, tuple[float, str]] = OrderedDict()

    def resumes(self, root_run_id: str, seq: int) -> bool:
        """A `run.started` past the end of a finished run: the run was resumed."""
        return root_run_id in self._over and seq > self._over[root_run_id][0]

    def start(self, conversation_key: str, root_run_id: str, seq: int = 0) -> str | None:
        """A run starts (or resumes); returns the run it supersedes (still open), if any."""
        if self.resumes(root_run_id, seq):
            del self._over[root_run_id]
        previous = self._current.get(conversation_key)
        self._current.set(conversation_key, root_run_id)
        if previous is not None and previous != root_run_id and previous not in self._over:
            self.end(previous, conversation_key=conversation_key)  # superseded: never current again
            return previous
        return None

    def end(self, root_run_id: str, seq: float = math.inf, conversation_key: str = "") -> None:
        self._over[root_run_id] = (seq, conversation_key)
        self._over.move_to_end(root_run_id)
        while len(self._over) > self.limit:
            self._over.popitem(last=False)

    def _open(self, _conversation_key: str, root_run_id: str) -> bool:
        return root_run_id not in self._over

    def is_over(self, root_run_id: str) -> bool:
        return root_run_id in self._over

    def forget(self, conversation_keys: Collection[str]) -> None:
        """Those conversations moved to another consumer (their partition was revoked): what is known
        here of their runs is stale, and if the partition comes back its records are read again
        from the committed offset, where a run known as over may still be unfinished."""
        for key in conversation_keys:
            self._current.pop(key)
        for root_run_id in [r for r, (_, key) in self._over.items() if key in conversation_keys]:
            del self._over[root_run_id]


FIRST_START_SEQ = 1  # run.queued is seq 0, the first run.started seq 1; a resumed run starts later


def first_segment(event: RunStarted) -> int:
    """Where a stream's platform messages are numbered from (the ledger key).

    A resumed run (same root run id, later seq) continues below what its first attempt
    showed: numbering from `seq × 1000` never collides with the first attempt's messages
    and maps the same way when a restart replays it.
    """
    return 0 if event.seq <= FIRST_START_SEQ else event.seq * 1000
