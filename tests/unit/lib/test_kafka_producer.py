from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from agentstream.contracts import MessageDelta, Notice, NoticeLevel, RecordType
from agentstream.kafka.internals import partition_of_key
from agentstream.kafka.producer import KeyPartitioner, encode_record


def test_a_record_is_written_as_its_json_with_its_type() -> None:
    delta = MessageDelta(
        run_id="r-1", root_run_id="r-1", conversation_key="web:c", seq=3, message_id="m", text='héllo "x"\n'
    )
    key, value, headers = encode_record(delta, "web:c")
    assert key == b"web:c"
    assert value == delta.model_dump_json().encode()
    assert MessageDelta.model_validate_json(value) == delta
    assert dict(headers) == {"content-type": b"application/json", "type": RecordType.MESSAGE_DELTA.encode()}


def test_headers_follow_each_records_type() -> None:
    notice = Notice(run_id="r-1", root_run_id="r-1", conversation_key="web:c", seq=0, level=NoticeLevel.INFO, text="")
    _, value, headers = encode_record(notice, "web:c")
    assert value == notice.model_dump_json().encode()
    assert dict(headers)["type"] == RecordType.NOTICE.encode()


@given(keys=st.lists(st.binary(max_size=64), min_size=1, max_size=30), count=st.integers(1, 64))
def test_the_key_partitioner_picks_what_aiokafkas_default_picks(keys: list[bytes], count: int) -> None:
    """Records of one conversation meet on one partition whoever sent them (ingress's batches pick
    with `partition_of_key`), asked once or again from memory, and past the memory's bound."""
    partitions = list(range(count))
    partitioner = KeyPartitioner(size=4)
    for key in keys + keys:
        expected = DefaultPartitioner()(key, partitions, partitions)
        assert partitioner(key, partitions, partitions) == expected == partition_of_key(key, partitions)


def test_a_record_without_a_key_goes_to_an_available_partition() -> None:
    assert {KeyPartitioner()(None, [0, 1, 2, 3], [2]) for _ in range(20)} == {2}
