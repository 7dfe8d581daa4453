"""Relay: config rules that copy a conversation's output elsewhere. Pure decisions, no I/O.

- mirror (`to` without `profile`): every run whose reply target matches also streams to
  `to`. The copy is one more stream of the same root run in the same consumer — same state
  machine, hooks, rate limits and ledger as the original.
- forward (`to` + `profile`): when a matching run completes, its final text becomes a new
  `InboundMessage` for `profile` at `to`; ingress routes and runs it like any message. The
  message id is derived from the run (`relay:<root run>:<rule>`), so a replayed
  `run.finished` is deduplicated by ingress. A run that was itself started by a forward is
  never forwarded again: rules A→B and B→A cannot loop.
"""

from __future__ import annotations

from collections import OrderedDict

from agentstream.config.delivery import RelayMatch, RelayRule
from agentstream.contracts import InboundMessage, ReplyTarget, RunFinished, RunQueued, RunStatus, User

RELAY_ID_PREFIX = "relay:"
RELAY_USER = "agentstream-relay"


def _matches(m: RelayMatch, target: ReplyTarget) -> bool:
    return (
        (m.platform is None or m.platform == target.platform)
        and (m.chat_id is None or m.chat_id == target.chat_id)
        and (m.thread_id is None or m.thread_id == target.thread_id)
    )


def _as_target(rule: RelayRule) -> ReplyTarget:
    return ReplyTarget(platform=rule.to.platform, chat_id=rule.to.chat_id, thread_id=rule.to.thread_id)


class Relay:
    def __init__(self, rules: list[RelayRule], remember: int = 10_000) -> None:
        self.rules = rules
        self._relayed_runs: OrderedDict[str, None] = OrderedDict()  # root runs started by a forward
        self._remember = remember

    def mirrors(self, source: ReplyTarget) -> list[ReplyTarget]:
        """Extra targets for a run answering `source` (never the source itself, no duplicates)."""
        out: list[ReplyTarget] = []
        for rule in self.rules:
            if rule.profile is None and _matches(rule.match, source):
                target = _as_target(rule)
                if target != source and target not in out:
                    out.append(target)
        return out

    def note_queued(self, event: RunQueued) -> None:
        if event.inbound_id and event.inbound_id.startswith(RELAY_ID_PREFIX):
            self._relayed_runs[event.root_run_id] = None
            while len(self._relayed_runs) > self._remember:
                self._relayed_runs.popitem(last=False)

    def forwards(self, source: ReplyTarget, event: RunFinished) -> list[InboundMessage]:
        """Inbound messages to produce for a finished run (completed, with text, not itself relayed)."""
        relayed = event.root_run_id in self._relayed_runs
        self._relayed_runs.pop(event.root_run_id, None)
        if relayed or event.status is not RunStatus.COMPLETED or not event.text.strip():
            return []
        return [
            InboundMessage(
                id=f"{RELAY_ID_PREFIX}{event.root_run_id}:{i}",
                platform=rule.to.platform,
                chat_id=rule.to.chat_id,
                thread_id=rule.to.thread_id,
                user=User(id=RELAY_USER, name="relay"),
                text=event.text,
                profile=rule.profile,
                metadata={"relay_from": event.conversation_key, "relay_root_run_id": event.root_run_id},
            )
            for i, rule in enumerate(self.rules)
            if rule.profile is not None and _matches(rule.match, source)
        ]
