"""The tool line marks each tool's outcome when its result arrives, on a platform that asks for it (the web)."""

from __future__ import annotations

from agentstream.contracts import ToolResult
from agentstream_delivery.platform_ops import Edit, Send
from agentstream_delivery.render import DEFAULT_TEXTS
from agentstream_delivery.stream_inputs import Break, Finish, TextDelta, ToolEnded, ToolStarted, stream_input
from tests.unit.delivery.machine_harness import feed, model


def progress_texts(ops: list[object]) -> list[str]:
    return [o.text for o in ops if isinstance(o, Send | Edit) and o.role == "progress"]


def test_a_tool_result_is_the_machines_tool_ended() -> None:
    ids = {"run_id": "r", "root_run_id": "r", "conversation_key": "k", "seq": 1}
    ok = ToolResult(**ids, call_id="c", tool="search", ok=True, content="x")
    failed = ToolResult(**ids, call_id="c", tool="search", ok=False, error="down")
    assert (stream_input(ok), stream_input(failed)) == (ToolEnded("search", True), ToolEnded("search", False))


def test_the_line_shows_each_outcome_and_loses_its_ellipsis_when_all_ended() -> None:
    _, ops = feed(
        model(tool_progress="new", marks_tool_ends=True),
        (0.0, TextDelta("m1", "Let me check")),
        (0.1, Break()),
        (0.2, ToolStarted("search")),
        (0.3, ToolStarted("calculator")),
        (0.4, ToolEnded("search", True)),
        (0.5, ToolEnded("calculator", False)),
        (0.6, TextDelta("m2", "Found it")),
        (0.7, Finish("completed")),
    )
    assert progress_texts(ops) == [
        "🔧 search …",
        "🔧 search → calculator …",
        "🔧 search ✓ → calculator …",
        "🔧 search ✓ → calculator ✗",
    ]
    assert all(o.final for o in ops if isinstance(o, Send | Edit) and o.role == "progress")  # type: ignore[attr-defined]


def test_a_result_before_the_line_is_shown_is_in_its_first_text() -> None:
    _, ops = feed(
        model(tool_progress="new", marks_tool_ends=True),
        (0.0, TextDelta("m1", "Checking")),
        (0.1, ToolStarted("search")),  # remembered: the text before it is not sealed yet
        (0.2, ToolEnded("search", True)),
        (0.3, Break()),
    )
    assert progress_texts(ops) == ["🔧 search ✓"]


def test_platforms_without_marks_keep_the_line_as_it_was_and_unknown_tools_change_nothing() -> None:
    steps = (
        (0.0, TextDelta("m1", "Checking")),
        (0.1, Break()),
        (0.2, ToolStarted("search")),
        (0.3, ToolEnded("search", True)),
        (0.4, ToolEnded("other", False)),
    )
    _, plain = feed(model(tool_progress="new"), *steps)
    _, marked = feed(model(tool_progress="new", marks_tool_ends=True), *steps)
    assert progress_texts(plain) == ["🔧 search …"]  # Telegram & co.: no edit it did not have before
    assert progress_texts(marked) == ["🔧 search …", "🔧 search ✓"]


def test_a_stop_during_a_tool_marks_the_line() -> None:
    _, ops = feed(
        model(tool_progress="new", marks_tool_ends=True),
        (0.0, TextDelta("m1", "Checking")),
        (0.1, Break()),
        (0.2, ToolStarted("search")),
        (0.3, Finish("interrupted", "user")),
    )
    assert progress_texts(ops)[-1] == "🔧 search …" + DEFAULT_TEXTS.stopped_marker
