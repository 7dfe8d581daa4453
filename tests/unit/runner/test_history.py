"""History: how much, what the model sees, what is new input; against the fake server."""

from __future__ import annotations

import pytest

from agentstream.contracts import ChatMessage, RunOptions
from agentstream_runner.history import StoredMessage, drop_overlap, history_size, replay
from agentstream_testing.fake_openai import FakeOpenAI
from tests.unit.runner.runner_harness import FakeHistory, assistant, run

# -- history -------------------------------------------------------------------------


def msgs(*pairs: tuple[str, str]) -> list[ChatMessage]:
    return [ChatMessage(role=r, content=c) for r, c in pairs]


@pytest.mark.parametrize(
    ("history", "incoming", "kept"),
    [
        ([("user", "a"), ("assistant", "b")], [("user", "c")], [("user", "c")]),  # none
        ([("user", "a"), ("assistant", "b")], [("assistant", "b"), ("user", "c")], [("user", "c")]),  # partial
        ([("user", "a"), ("assistant", "b")], [("user", "a"), ("assistant", "b")], []),  # full
        ([("user", "a"), ("assistant", "b")], [("user", "a"), ("assistant", "b"), ("user", "c")], [("user", "c")]),
        ([("user", "x")], [("assistant", "x")], [("assistant", "x")]),  # same content, other role
    ],
)
def test_overlap_dropping(history, incoming, kept):
    assert drop_overlap(msgs(*history), msgs(*incoming)) == msgs(*kept)


def test_history_size_priority_and_skip():
    def options(**given: object) -> RunOptions:
        return RunOptions.model_validate(given)

    assert history_size(options(history_size=3), 7) == 3
    assert history_size(options(), 7) == 7
    assert history_size(options(), None) == 20
    assert history_size(options(history_size="lots"), None) == 20
    assert history_size(options(history_size=True), None) == 20
    assert options(skip=["history"]).skips_history and options(**{"skip.history": True}).skips_history
    assert options(skip="history").skips_history
    assert not options(skip=["other"]).skips_history


def test_tool_rows_are_replayed_as_summaries():
    rows = [
        StoredMessage("user", "q"),
        StoredMessage("tool", "x" * 500, name="calculator"),
        StoredMessage("assistant", "a"),
        StoredMessage("system", "ignored"),
    ]
    replayed = replay(rows)
    assert [m.role for m in replayed] == ["user", "assistant", "assistant"]
    assert replayed[1].content.startswith("[tool calculator returned: xxx") and len(replayed[1].content) < 250


async def test_history_is_loaded_and_the_overlap_dropped():
    history = FakeHistory([("user", "earlier"), ("assistant", "reply"), ("user", "again")])
    async with FakeOpenAI() as fake:
        ports = await run(
            fake,
            "ignored",
            history=history,
            options={"messages": [{"role": "user", "content": "again"}, {"role": "user", "content": "new"}]},
        )
        sent = [(m["role"], m["content"]) for m in fake.requests[0].body["messages"]]
    assert sent[1:] == [("user", "earlier"), ("assistant", "reply"), ("user", "again"), ("user", "new")]
    assert [(m.role, m.content) for m in ports.started.input] == [("user", "new")]  # only the new input is stored
    assert history.limits == [20]


async def test_history_size_request_over_assistant():
    short = assistant("short", history_size=2)
    history = FakeHistory([("user", "1"), ("assistant", "2"), ("user", "3")])
    async with FakeOpenAI() as fake:
        await run(fake, "q", history=history, assistants=[short], assistant_id="short")
        await run(fake, "q", history=history, assistants=[short], assistant_id="short", options={"history_size": 1})
        assert [m["content"] for m in fake.requests[0].body["messages"]] == ["2", "3", "q"]
    assert history.limits == [2, 1]


async def test_skip_history_and_failing_history():
    history = FakeHistory([("user", "old")])
    broken = FakeHistory(fail=True)
    async with FakeOpenAI() as fake:
        await run(fake, "q", history=history, options={"skip": ["history"]})
        ports = await run(fake, "q2", history=broken)
        assert [m["role"] for m in fake.requests[0].body["messages"]] == ["system", "user"]
        assert [m["content"] for m in fake.requests[1].body["messages"][1:]] == ["q2"]
    assert history.limits == [] and broken.limits == [20]
    assert ports.finished.status == "completed"
