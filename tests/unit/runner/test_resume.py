"""Resume seams: the memory a resumed run continues from, and its rebuilt start."""

from __future__ import annotations

from agentstream.contracts import (
    ApprovalRequest,
    ChatMessage,
    CheckpointStart,
    PendingCall,
    ResumeRun,
    ToolCallSpec,
    Usage,
)
from agentstream_runner.resume import (
    Checkpoint,
    ResumeVerdict,
    SavedStep,
    callable_memory,
    paused_at_approval,
    resume_verdict,
    saved_input,
    start_of,
)

USER = ChatMessage(role="user", content="q")


def test_resume_memory_skips_an_llm_step_whose_tool_round_never_completed():
    call = ChatMessage(role="assistant", tool_calls=[ToolCallSpec(id="c1", name="clock")])
    tool = ChatMessage(role="tool", content="noon", tool_call_id="c1")
    call2 = ChatMessage(role="assistant", tool_calls=[ToolCallSpec(id="c2", name="clock")])
    steps = [
        SavedStep("llm-1", "llm", [USER, call]),
        SavedStep("tool-2", "tool", [USER, call, tool]),
        SavedStep("llm-3", "llm", [USER, call, tool, call2]),
    ]
    assert callable_memory(steps) == [USER, call, tool]
    assert callable_memory(steps[:1]) is None
    assert callable_memory([]) is None


def test_the_resumed_start_is_rebuilt_from_the_checkpoint():
    checkpoint = Checkpoint(
        root_run_id="r1",
        conversation_key="web:c1:t",
        status="interrupted",
        last_seq=9,
        usage=Usage(),
        start=CheckpointStart.model_validate(
            {
                "assistant_id": "helper",
                "user_id": "u1",
                "session_id": "s1",
                "connector_id": "fake",
                "reply_target": None,
                "input": [USER.model_dump()],
                "text": "",
            }
        ),
    )
    s = start_of(ResumeRun(conversation_key="web:c1:t", run_id="r1"), checkpoint)
    assert (s.run_id, s.assistant_id, s.user.id, s.session_id, s.text) == ("r1", "helper", "u1", "s1", "q")
    assert s.options.as_dict() == {"connector": "fake"}
    assert (s.reply_target.platform, s.reply_target.chat_id, s.reply_target.thread_id) == ("web", "c1", "t")


# A `start` column as persistence wrote it before `tenant_id` existed, read from the database as JSON.
OLD_START_JSON = (
    '{"assistant_id": null, "connector_id": null, "user_id": "u7", "session_id": null,'
    ' "reply_target": {"platform": "telegram", "chat_id": "42", "thread_id": null},'
    ' "input": [], "text": "hello again"}'
)


def test_a_checkpoint_in_the_old_shape_still_resumes():
    start = CheckpointStart.model_validate_json(OLD_START_JSON)
    checkpoint = Checkpoint("r2", "acme/telegram:42", "failed", 3, Usage(), start)
    s = start_of(ResumeRun(conversation_key="acme/telegram:42", run_id="r2"), checkpoint)
    assert (s.assistant_id, s.text, s.user.id, s.user.tenant_id) == ("default", "hello again", "u7", "acme")
    assert (s.reply_target.platform, s.reply_target.chat_id) == ("telegram", "42")
    assert saved_input(checkpoint, s) == [ChatMessage(role="user", content="hello again")]
    assert CheckpointStart.model_validate({}) == CheckpointStart()  # a checkpoint with no start at all


def test_a_run_that_ended_at_an_approval_step_waits_for_the_same_request_again():
    call = ChatMessage(role="assistant", tool_calls=[ToolCallSpec(id="c1", name="shell")])
    request = ApprovalRequest(
        approval_id="a1",
        calls=[PendingCall(call_id="c1", tool="shell", arguments="{}")],
        user_id="u1",
        expires_at="2026-01-01T00:10:00Z",
    )
    llm = SavedStep("llm-1", "llm", [USER, call])
    approval = SavedStep("approval-5", "approval", [USER, call], request.model_dump(mode="json"))
    paused = paused_at_approval([llm, approval])
    assert paused is not None and paused.request == request and paused.memory == [USER, call]
    assert callable_memory([llm, approval]) is None  # without the approval step: the model is asked again
    tool = ChatMessage(role="tool", content="x", tool_call_id="c1")
    assert paused_at_approval([llm, approval, SavedStep("tool-7", "tool", [USER, call, tool])]) is None
    assert paused_at_approval([llm]) is None and paused_at_approval([]) is None


def checkpoint_at(last_seq: int, run_id: str = "r1") -> Checkpoint:
    return Checkpoint(run_id, "web:c1", "failed", last_seq, Usage(), CheckpointStart())


def test_a_checkpoint_is_resumed_from_once_and_never_below_a_resume_begun_since():
    """docs/decisions.md § Orphaned runs: a ResumeRun read again after its resume had begun."""
    assert resume_verdict(None, None, set()) is ResumeVerdict.NO_CHECKPOINT
    assert resume_verdict(None, 9, set()) is ResumeVerdict.NO_CHECKPOINT
    assert resume_verdict(checkpoint_at(4), None, set()) is ResumeVerdict.RESUME
    # A resume from 4 had begun and was ended at 9: the checkpoint of 4 would number over its events.
    assert resume_verdict(checkpoint_at(4), 9, set()) is ResumeVerdict.BEHIND
    assert resume_verdict(checkpoint_at(9), 9, set()) is ResumeVerdict.RESUME
    assert resume_verdict(checkpoint_at(12), 9, set()) is ResumeVerdict.RESUME
    # Resumed from here already: the second ResumeRun for the same ending is a repeat.
    assert resume_verdict(checkpoint_at(9), 9, {("r1", 9)}) is ResumeVerdict.REPEAT
    assert resume_verdict(checkpoint_at(9), None, {("r1", 9), ("r2", 12)}) is ResumeVerdict.REPEAT
    assert resume_verdict(checkpoint_at(12), None, {("r1", 9)}) is ResumeVerdict.RESUME
    assert resume_verdict(checkpoint_at(9, "r2"), None, {("r1", 9)}) is ResumeVerdict.RESUME
