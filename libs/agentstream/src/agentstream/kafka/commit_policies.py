"""The named ways a consumer commits its offsets (docs/architecture.md § Commits).

A `Consumer` (kafka/consumer.py) is given one of these; it is what the service says about
its records, and the consumer does the rest:

- `AtMostOnce`: the client commits what it polled, on its own clock (aiokafka's auto-commit).
  A record polled before a crash may never be handled; none is handled twice by this group.
  For observers whose loss costs little (delivery's hooks).
- `OldestOpen`: never past the oldest open unit. A record is done once handled, unless a unit
  that started at it is still open: one opened by the service (`points.hold`, delivery's streams),
  one the service names (`oldest_of`, persistence's unflushed runs), or, with `each_record_open`,
  the record itself until the service says `done` (tool-executor's calls).
- `AfterOutputAcked`: a batch's offsets once the output it produced is acked by Kafka; a batch
  whose output failed is read again (ingress, kafka/batch_commits.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from agentstream.kafka.commits import OldestOf


@dataclass(frozen=True)
class AtMostOnce:
    """The client's auto-commit: what was polled counts as done."""


@dataclass(frozen=True)
class OldestOpen:
    """Commit up to the first record of the oldest open unit of each partition.

    `every_s`: a commit round that often (besides the service's own `commit`/`commit_soon`).
    `oldest_of`: partition → first offset of the oldest unit held outside the points.
    `each_record_open`: every record is an open unit from its read until `Consumer.done`,
    which asks for a round within `commit_within_s` (one round for the records done meanwhile).
    """

    every_s: float | None = None
    oldest_of: OldestOf | None = None
    each_record_open: bool = False
    commit_within_s: float = 0.1


@dataclass(frozen=True)
class AfterOutputAcked:
    """A batch's offsets, once the records its handler handed to the producer are acked."""


CommitPolicy = AtMostOnce | OldestOpen | AfterOutputAcked
