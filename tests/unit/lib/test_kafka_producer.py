from agentstream.contracts import MessageDelta, Notice, NoticeLevel, RecordType
from agentstream.kafka.producer import encode_record


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
