"""`RunRecorder`: what `send --json` and `runs resume --json` print of a followed run."""

from __future__ import annotations

from agentstream.contracts import Notice, NoticeLevel, RunFinished, RunStatus, ToolResult
from agentstream.contracts.common import Usage
from agentstream.contracts.endings import FinishReason
from agentstream_stack.run_follower import RunRecorder

IDS = {"root_run_id": "root", "conversation_key": "web:c"}


def test_the_document_is_the_root_runs_outcome_with_its_tools_and_notices() -> None:
    recorder = RunRecorder()
    recorder(
        ToolResult(run_id="child", parent_run_id="root", depth=1, seq=1, call_id="c1", tool="search", ok=True, **IDS)
    )
    recorder(ToolResult(run_id="root", seq=2, call_id="c2", tool="fetch", ok=False, error="timeout", **IDS))
    recorder(RunFinished(run_id="child", seq=3, status=RunStatus.COMPLETED, text="sub-answer", **IDS))  # a sub-agent's
    recorder(Notice(run_id="root", seq=4, level=NoticeLevel.WARNING, text="slow", **IDS))
    recorder(
        RunFinished(
            run_id="root",
            seq=5,
            status=RunStatus.INTERRUPTED,
            reason=FinishReason.USER,
            text="partial",
            usage=Usage(prompt_tokens=3, completion_tokens=4, llm_calls=1),
            duration_ms=12.5,
            **IDS,
        )
    )
    assert recorder.document(message_id="m1") == {
        "message_id": "m1",
        "run_id": "root",
        "status": "interrupted",
        "reason": "user",
        "error": None,
        "text": "partial",
        "tools": [{"tool": "search", "ok": True, "error": None}, {"tool": "fetch", "ok": False, "error": "timeout"}],
        "notices": [{"level": "warning", "text": "slow"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "llm_calls": 1},
        "duration_ms": 12.5,
    }


def test_a_message_answered_by_a_notice_alone_has_no_outcome() -> None:
    recorder = RunRecorder()
    recorder(Notice(run_id="n", root_run_id="n", conversation_key="web:c", seq=0, text="You are not authorized."))
    document = recorder.document()
    assert document["run_id"] is None and document["status"] is None and document["usage"] is None
    assert document["notices"] == [{"level": "info", "text": "You are not authorized."}]
