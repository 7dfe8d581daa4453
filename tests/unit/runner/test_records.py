import json

from agentstream.contracts import InterruptRun, ReplyTarget, StartRun, ToolCallResult
from agentstream_runner.records import Undecodable, decode_record


def test_run_commands_and_tool_results_by_type():
    start = StartRun(
        run_id="r",
        conversation_key="k",
        assistant_id="a",
        text="t",
        reply_target=ReplyTarget(platform="web", chat_id="c"),
    )
    assert decode_record(start.to_json()) == start
    assert isinstance(decode_record(InterruptRun(conversation_key="k").to_json()), InterruptRun)
    result = ToolCallResult(run_id="r", root_run_id="r", conversation_key="k", call_id="c", tool="clock", ok=True)
    assert decode_record(result.to_json()) == result


def test_undecodable_records_have_readable_reasons():
    assert decode_record(b"\xff{").reason.startswith("not valid JSON")
    assert decode_record(b"[1, 2]") == Undecodable("expected a JSON object, got list")
    unknown = decode_record(json.dumps({"type": "run.explode"}).encode())
    assert isinstance(unknown, Undecodable)
    assert "unknown record type 'run.explode'" in unknown.reason and "run.start" in unknown.reason
    missing = decode_record(json.dumps({"type": "run.start", "conversation_key": "k"}).encode())
    assert isinstance(missing, Undecodable)
    assert missing.reason.startswith("invalid run.start: ") and "run_id: Field required" in missing.reason


def test_deep_nesting_is_undecodable_not_an_exception():
    assert decode_record(b"[" * 5000) == Undecodable("not valid JSON: nested too deeply")
    assert decode_record(b'{"type": "run.start", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}") == Undecodable(
        "not valid JSON: nested too deeply"
    )
