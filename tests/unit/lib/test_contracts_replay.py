"""A run's archived events given a replay's identity: new root, conversation and target; order and tree kept."""

from __future__ import annotations

from agentstream.contracts import (
    MessageCompleted,
    Notice,
    ReplyTarget,
    RunFinished,
    RunStarted,
    ToolCall,
    Usage,
    replayed,
)

ORIGINAL = ReplyTarget(platform="memory", chat_id="c1")
NEW = ReplyTarget(platform="telegram", chat_id="-5", thread_id="7")


def ids(seq: int, run_id: str = "orig", **kw: object) -> dict[str, object]:
    return {"run_id": run_id, "root_run_id": "orig", "conversation_key": "memory:c1", "seq": seq, "epoch": 3, **kw}


def test_every_event_moves_to_the_replay_and_the_new_chat():
    events = [
        RunStarted(**ids(1), assistant_id="a", connector_id="demo", reply_target=ORIGINAL, user_id="u"),
        ToolCall(**ids(2, run_id="child", parent_run_id="orig", depth=1), call_id="c", tool="clock", arguments="{}"),
        Notice(**ids(3), text="note", reply_target=ORIGINAL),
        MessageCompleted(**ids(4), message_id="m", text="answer"),
        RunFinished(**ids(5), status="completed", text="answer", usage=Usage(prompt_tokens=9, llm_calls=1)),
    ]
    out = [replayed(e, "rep", NEW) for e in events]
    assert {(e.root_run_id, e.conversation_key, e.epoch) for e in out} == {("rep", "telegram:-5:7", 0)}
    assert [e.seq for e in out] == [1, 2, 3, 4, 5]
    assert [e.run_id for e in out] == ["rep", "child", "rep", "rep", "rep"]
    assert out[1].parent_run_id == "rep" and out[1].depth == 1
    assert not {e.id for e in out} & {e.id for e in events}  # new records, not copies of the original's
    start, notice, finish = out[0], out[2], out[4]
    assert isinstance(start, RunStarted) and isinstance(notice, Notice) and isinstance(finish, RunFinished)
    assert start.reply_target == NEW and notice.reply_target == NEW
    assert start.replay_of == "orig" and not start.store_history and start.user_id == "u"
    assert finish.usage == Usage() and finish.text == "answer"  # shown again, never billed again
    assert events[0].replay_of is None  # the original is untouched
