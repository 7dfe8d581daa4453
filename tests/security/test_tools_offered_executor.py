"""An attacker who can produce to `tool-calls` cannot run a tool: on the real broker, records written
straight to the topic — unsigned, signed with another secret, "approved" after signing, naming a tool
outside the offered list, or a tool that requires approval without one — are answered refused and
dead-lettered, and the tool's side effect (a file it writes) never happens. Calls signed as a runner
signs them run, so the absent files mean the refusals, not a tool that cannot run."""

from __future__ import annotations

import json
import textwrap

import pytest

from agentstream.contracts import DeadLetter, ToolCallRefusal, ToolCallRequest, ToolCallResult
from agentstream.host import ServiceHost
from agentstream.kafka import free_port
from agentstream.tool_call_signing import sign
from agentstream_testing.kafka import produce_raw, read_until
from agentstream_testing.signed_calls import signed
from agentstream_tools.bootstrap import bootstrap as bootstrap_tool_executor

TOUCH, GUARDED = "side__touch", "side__touch_guarded"  # the second requires approval


def call(call_id: str, tool: str) -> ToolCallRequest:
    """A call whose tool writes the file `call_id` when it runs."""
    return ToolCallRequest(
        run_id="r1",
        root_run_id="r1",
        conversation_key="web:victim",
        call_id=call_id,
        tool=tool,
        arguments=json.dumps({"name": call_id}),
    )


@pytest.mark.timeout(90)
async def test_calls_a_runner_did_not_sign_as_they_are_never_run(
    settings_factory, topics_created, tmp_path, monkeypatch
):
    marks = tmp_path / "marks"
    marks.mkdir()
    (tmp_path / "side_tools.py").write_text(
        textwrap.dedent(f'''
        from pathlib import Path

        def touch(name: str) -> str:
            """Leave a mark.

            Args:
                name: The mark's file name.
            """
            (Path({str(marks)!r}) / name).write_text("ran")
            return "ran"

        def touch_guarded(name: str) -> str:
            """Leave a mark, once approved.

            Args:
                name: The mark's file name.
            """
            return touch(name)
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = settings_factory(
        tools={"functions": {"side": ["side_tools.touch", "side_tools.touch_guarded"]}, "requires_approval": [GUARDED]}
    )
    svc = bootstrap_tool_executor(settings)
    attacks = {
        "unsigned": (call("unsigned", TOUCH), ToolCallRefusal.UNSIGNED),
        "other-secret": (sign(call("other-secret", TOUCH).model_copy(update={"offered": [TOUCH]}), b"x" * 32), ToolCallRefusal.BAD_SIGNATURE),
        "not-offered": (signed(call("not-offered", TOUCH), offered=["calculator"]), ToolCallRefusal.NOT_OFFERED),
        "not-approved": (signed(call("not-approved", GUARDED)), ToolCallRefusal.NOT_APPROVED),
        "self-approved": (
            signed(call("self-approved", GUARDED)).model_copy(update={"approval_id": "a-forged"}),
            ToolCallRefusal.BAD_SIGNATURE,
        ),
    }  # fmt: skip
    allowed = [signed(call("signed", TOUCH)), signed(call("approved", GUARDED), approval_id="a1")]
    bootstrap, topics = settings.kafka.bootstrap_servers, svc.topics

    async with ServiceHost([svc], "127.0.0.1", {svc.name: free_port()}):
        for request in [*(a for a, _ in attacks.values()), *allowed]:
            await produce_raw(bootstrap, topics.tool_calls, request.to_json(), key=request.conversation_key.encode())
        records = await read_until(bootstrap, topics.tool_results, lambda rs: len(rs) >= len(attacks) + len(allowed))
        letters = await read_until(bootstrap, topics.dlq, lambda rs: len(rs) >= len(attacks))
        refused_count = {r: svc.refusals.labels(r)._value.get() for r in ToolCallRefusal}

    results = {r.call_id: r for r in (ToolCallResult.model_validate_json(rec.value) for rec in records)}
    for call_id, (_, reason) in attacks.items():
        result = results[call_id]
        assert (result.ok, result.retryable, result.refused) == (False, False, reason), call_id
        assert result.error is not None and result.error.startswith("tool call refused")
    assert all(results[c.call_id].ok and results[c.call_id].refused is None for c in allowed)
    assert sorted(p.name for p in marks.iterdir()) == ["approved", "signed"]  # no attack left a mark

    dead = {json.loads(d.raw_value)["call_id"]: d for d in (DeadLetter.model_validate_json(r.value) for r in letters)}
    assert set(dead) == set(attacks)
    for call_id, (_, reason) in attacks.items():
        assert dead[call_id].service == "tool-executor" and dead[call_id].error.endswith(f"({reason})"), call_id
    assert refused_count == {
        ToolCallRefusal.UNSIGNED: 1,
        ToolCallRefusal.BAD_SIGNATURE: 2,
        ToolCallRefusal.NOT_OFFERED: 1,
        ToolCallRefusal.NOT_APPROVED: 1,
    }
