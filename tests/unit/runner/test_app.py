"""What the runner's one subscription (`runs` + `tool-results`) decodes, through the shared decoder."""

from __future__ import annotations

import json

from agentstream.contracts import Arrival, InterruptRun, ReplyTarget, StartRun, ToolCallResult
from agentstream.kafka.decoding import Undecodable, decode_record
from agentstream_runner.app import RUNNER_RECORD, RUNNER_RECORD_NAME, arrived


def decode(raw: bytes) -> object:
    return decode_record(raw, RUNNER_RECORD, RUNNER_RECORD_NAME)


def test_run_commands_and_tool_results_by_type():
    start = StartRun(
        run_id="r",
        conversation_key="k",
        assistant_id="a",
        text="t",
        reply_target=ReplyTarget(platform="web", chat_id="c"),
    )
    assert decode(start.to_json()) == start
    assert isinstance(decode(InterruptRun(conversation_key="k").to_json()), InterruptRun)
    result = ToolCallResult(run_id="r", root_run_id="r", conversation_key="k", call_id="c", tool="clock", ok=True)
    assert decode(result.to_json()) == result


def test_undecodable_records_have_readable_reasons():
    bad_bytes = decode(b"\xff{")
    assert isinstance(bad_bytes, Undecodable) and bad_bytes.reason.startswith("not valid JSON")
    not_object = decode(b"[1, 2]")
    assert isinstance(not_object, Undecodable) and not_object.reason.startswith(f"invalid {RUNNER_RECORD_NAME}: ")
    unknown = decode(json.dumps({"type": "run.explode"}).encode())
    assert isinstance(unknown, Undecodable)
    assert (
        "'run.explode'" in unknown.reason and "'run.start'" in unknown.reason and "'tool.call_result'" in unknown.reason
    )
    missing = decode(json.dumps({"type": "run.start", "conversation_key": "k"}).encode())
    assert isinstance(missing, Undecodable)
    assert missing.reason.startswith(f"invalid {RUNNER_RECORD_NAME}: ") and "run_id: Field required" in missing.reason


def test_deep_nesting_is_undecodable_not_an_exception():
    for raw in (b"[" * 5000, b'{"type": "run.start", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"):
        nested = decode(raw)
        assert isinstance(nested, Undecodable) and nested.reason.startswith("not valid JSON"), nested


def test_the_runner_adds_its_hops_to_a_start_s_arrival():
    start = StartRun(
        run_id="r1",
        conversation_key="web:c",
        assistant_id="default",
        text="hi",
        reply_target=ReplyTarget(platform="web", chat_id="c"),
        arrival=Arrival(produced_at=10.0, ingress_read_at=10.002),
    )
    stamped = arrived(start, 10_005, 10.009)
    assert stamped.arrival == Arrival(
        produced_at=10.0, ingress_read_at=10.002, runs_produced_at=10.005, runner_read_at=10.009
    )
    assert stamped.run_id == start.run_id and start.arrival.runner_read_at is None  # a copy
    assert decode(stamped.to_json()) == stamped  # it travels on: `run.started` copies it
