"""The ids ingress gives runs and records are random version-4 UUIDs, as `new_id` makes."""

import uuid

from agentstream_ingress.starting import fresh_id


def test_fresh_ids_are_distinct_rfc4122_version_4_uuids():
    ids = [fresh_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for s in ids:
        u = uuid.UUID(s)
        assert (u.version, u.variant, str(u)) == (4, uuid.RFC_4122, s)
    assert {s[19] for s in ids} == set("89ab")  # every variant digit occurs: the bits are random
