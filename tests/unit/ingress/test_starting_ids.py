"""The ids a run derives from its inbound record: `uuid5_text` is `uuid.uuid5` as text, exactly
(a different id for the same record would start a re-read batch's runs again)."""

from __future__ import annotations

import uuid

import pytest

from agentstream_ingress.starting import RUN_ID_NAMESPACE, Cause, IdRole, notice_id, uuid5_text

NAMES = [
    "",
    "run\x1fkafka\x1ftelegram\x1f42\x1f3\x1f1017",
    "start\x1fwebhook:slack\x1fslack\x1fm-1",
    "é☃ 𝄞 mixed text, non-ASCII in a message id",
    "x" * 10_000,
]


@pytest.mark.parametrize("name", NAMES)
def test_uuid5_text_is_uuid5(name: str) -> None:
    assert uuid5_text(name) == str(uuid.uuid5(RUN_ID_NAMESPACE, name))


def test_derived_ids_are_uuid5_of_the_cause() -> None:
    cause = Cause(("kafka", "telegram", "m-7"), (2, 99))
    for role in IdRole:
        expected = uuid.uuid5(RUN_ID_NAMESPACE, "\x1f".join((role.value, "kafka", "telegram", "m-7", "2", "99")))
        assert cause.derived_id(role) == str(expected)
        assert uuid.UUID(cause.derived_id(role)).version == 5
    assert len({cause.derived_id(role) for role in IdRole}) == len(IdRole)
    assert Cause(("kafka", "telegram", "m-7")).derived_id(IdRole.RUN) != cause.derived_id(IdRole.RUN)


def test_notice_id_is_uuid5_of_place_and_time() -> None:
    assert notice_id((1, 5), 1_700_000_000_000) == str(
        uuid.uuid5(RUN_ID_NAMESPACE, "notice\x1f1\x1f5\x1f1700000000000")
    )


@pytest.mark.parametrize(
    "cause",
    [
        Cause(("kafka", "telegram", "m-7"), (2, 99)),
        Cause(("webhook:slack", "slack", "é☃ 𝄞")),
        Cause(("acme/kafka", "web", "x" * 300), (0, 0)),
    ],
)
def test_a_runs_ids_at_once_are_each_roles_derived_id(cause: Cause) -> None:
    ids = cause.derived_ids()
    assert (ids.run, ids.start_record, ids.queued_record) == tuple(
        cause.derived_id(role) for role in (IdRole.RUN, IdRole.START_RECORD, IdRole.QUEUED_RECORD)
    )
    parts = (*cause.key, *(str(n) for n in cause.position or ()))
    assert ids.run == str(uuid.uuid5(RUN_ID_NAMESPACE, "\x1f".join(("run", *parts))))
