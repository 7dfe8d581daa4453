"""Start (docs/ingress.md): the run for an accepted message — StartRun for `runs`, run.queued for `events`.

The run id and both record ids are derived from the inbound record that caused the run (its
message's dedupe key and its place in `inbound`), not drawn at random: a batch read again
after a crash between its output's acks and its dedupe rows (docs/decisions.md) then writes
the same run under the same ids, and the runner, persistence and delivery recognise the repeat.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from agentstream.config import Settings
from agentstream.contracts import Arrival, DoubleTexting, InboundMessage, RunOptions, RunQueued, StartRun
from agentstream.contracts.inbound import DedupeKey
from agentstream_ingress.decisions import StartDecision, target_of
from agentstream_ingress.routing import Routed

CONNECTOR_ROLE_PREFIX = "use::"

# Fixed forever: changing it changes every derived id, and a batch re-read across an
# upgrade would then start its runs again.
RUN_ID_NAMESPACE = uuid.UUID("5b0c3c1e-7f3d-4c55-9a51-0d2a8e6f4b17")

_NAMESPACE_BYTES = RUN_ID_NAMESPACE.bytes

# The variant digit of an RFC 4122 UUID (10xx in binary), by the hex digit it replaces.
_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def _uuid5_of(hashed: hashlib._Hash) -> str:
    """The version-5 UUID text of a SHA-1 of the namespace and a name: the first 16 bytes of the
    digest, version and variant set, in 8-4-4-4-12 hex (`str(uuid.UUID(...))`)."""
    h = hashed.hexdigest()
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


def uuid5_text(name: str) -> str:
    """`str(uuid.uuid5(RUN_ID_NAMESPACE, name))`, without the UUID object: three per started run
    were a tenth of ingress's CPU per record."""
    return _uuid5_of(hashlib.sha1(_NAMESPACE_BYTES + name.encode("utf-8"), usedforsecurity=False))


Position = tuple[int, int]  # (partition, offset) of a record in `inbound`


class IdRole(StrEnum):
    """Which of the ids one inbound record yields."""

    RUN = "run"
    START_RECORD = "start"
    QUEUED_RECORD = "queued"


# The SHA-1 of the namespace and each role's prefix, copied per id: the three ids of a run share
# all but their role, so the cause is joined and encoded once (`Cause.derived_ids`).
_ROLE_HASHES = {
    role: hashlib.sha1(_NAMESPACE_BYTES + f"{role.value}\x1f".encode(), usedforsecurity=False) for role in IdRole
}


RUN_ID_ROLES = (IdRole.RUN, IdRole.START_RECORD, IdRole.QUEUED_RECORD)  # in `RunIds` order


class RunIds(NamedTuple):
    """The ids of one started run and of the two records announcing it."""

    run: str
    start_record: str
    queued_record: str


@dataclass(frozen=True)
class Cause:
    """The inbound record a run answers. Its place in `inbound` is part of it: a message id
    reused once its dedupe row is purged (`retention.inbound_dedupe_days`) is another record,
    and must not become the old run again; a record read again is the same one."""

    key: DedupeKey  # (source, platform, message id)
    position: Position | None = None  # None: not read from Kafka (tests, `Pipeline.decide`)
    # When the record was produced and read, stamped on the run (not part of its ids): built with
    # the StartRun, not copied onto it afterwards (records are frozen: a copy per run).
    arrival: Arrival | None = field(default=None, compare=False)

    def _name(self) -> bytes:
        # The unit separator cannot occur in the parts (ids refuse control characters), so
        # two different causes never join to the same name.
        where = (str(n) for n in self.position) if self.position is not None else ()
        return "\x1f".join((*self.key, *where)).encode("utf-8")

    def derived_id(self, role: IdRole) -> str:
        """A UUID (version 5) of `role` and the cause: `uuid5_text(f"{role}\\x1f{cause}")`."""
        hashed = _ROLE_HASHES[role].copy()
        hashed.update(self._name())
        return _uuid5_of(hashed)

    def derived_ids(self) -> RunIds:
        """The run's three ids (`derived_id` of each role), the cause joined once."""
        name = self._name()
        run, start, queued = (_ROLE_HASHES[role].copy() for role in RUN_ID_ROLES)
        run.update(name)
        start.update(name)
        queued.update(name)
        return RunIds(_uuid5_of(run), _uuid5_of(start), _uuid5_of(queued))


def notice_id(position: Position, timestamp: int) -> str:
    """The id of the notice ingress writes for the inbound record at `position`, written at
    `timestamp` (the record's Kafka time, ms): a re-read writes the same notice, which
    delivery's ledger shows once; a recreated topic's record at an old offset is another."""
    return uuid5_text("\x1f".join(("notice", *(str(n) for n in (*position, timestamp)))))


NO_OPTIONS = RunOptions()  # frozen: the options of every run nothing asks anything of, shared


def run_options(routed: Routed, role_override: str | None, double_texting: DoubleTexting | None = None) -> RunOptions:
    """What the profile (and a `/model` override or `/queue`) asks of the runner and delivery."""
    profile = routed.profile
    given: dict[str, Any] = {}
    role = role_override or profile.connector_role
    if role:
        given["connector"] = f"{CONNECTOR_ROLE_PREFIX}{role}"
    policy = double_texting or profile.double_texting
    if policy:
        given["double_texting"] = policy
    if profile.delivery:
        given["delivery"] = dict(profile.delivery)
    return RunOptions.model_validate(given) if given else NO_OPTIONS


def build_start(
    msg: InboundMessage,
    routed: Routed,
    role_override: str | None,
    settings: Settings,
    double_texting: DoubleTexting | None = None,
    cause: Cause | None = None,
) -> StartDecision:
    """The run answering `msg`; its ids derive from `cause`, the inbound record it answers
    (`msg`'s own unless the run repeats an older message, as `/retry` does)."""
    cause = cause or Cause(msg.dedupe_key)
    ids = cause.derived_ids()
    assistant = msg.assistant_id or routed.profile.assistant or settings.default_assistant
    start = StartRun(
        id=ids.start_record,
        ts=datetime.now(UTC),
        run_id=ids.run,
        conversation_key=msg.conversation_key,
        assistant_id=assistant,
        user=msg.user,
        text=msg.text,
        inbound_id=msg.id,
        reply_target=target_of(msg),
        metadata={**msg.metadata, "profile": routed.name},
        options=run_options(routed, role_override, double_texting),
        arrival=cause.arrival,
    )
    return StartDecision(message=msg, start=start, queued=queued_for(start, ids.queued_record))


def queued_for(start: StartRun, record_id: str) -> RunQueued:
    """The `run.queued` event announcing `start`: the first record (seq 0) of its root run."""
    return RunQueued(
        id=record_id,
        ts=start.ts,
        run_id=start.run_id,
        root_run_id=start.run_id,
        conversation_key=start.conversation_key,
        seq=0,
        assistant_id=start.assistant_id,
        inbound_id=start.inbound_id,
        reply_target=start.reply_target,
        text=start.text,
        user_id=start.user.id if start.user else None,
        tenant_id=start.user.tenant_id if start.user else None,
    )
