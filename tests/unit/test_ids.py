"""Record and run ids are random version-4 UUIDs (`new_id`, used by every service)."""

import uuid

from agentstream.contracts import new_id


def test_new_ids_are_distinct_rfc4122_version_4_uuids():
    ids = [new_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for s in ids:
        u = uuid.UUID(s)
        assert (u.version, u.variant, str(u)) == (4, uuid.RFC_4122, s)
    assert {s[19] for s in ids} == set("89ab")  # every variant digit occurs: the bits are random
