import builtins

import pytest

from agentstream_tools.builtin.calculator import evaluate, format_number
from agentstream_tools.validation import ArgumentError, ToolError


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("6*7", "42"),
        ("7/2", "3.5"),
        ("6/3", "2"),
        ("7 // 2", "3"),
        ("7 % 3", "1"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("-(2 + 3) * 4", "-20"),
        ("+5 - -5", "10"),
        ("(1 + 2) * (3 + 4) / 7", "3"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("1.5 * 2", "3"),
    ],
)
def test_arithmetic(expression, expected):
    assert format_number(evaluate(expression)) == expected


def test_division_by_zero_is_a_tool_error():
    for expression in ("1/0", "5 // 0", "5 % 0", "0 ** -1"):
        with pytest.raises(ToolError, match="^division by zero$"):
            evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "a + 1",
        "True + 1",
        "'a' * 3",
        "abs(-1)",
        "[1, 2]",
        "1 if 1 else 2",
        "2 << 3",
        "1j",
        "6*",
        "",
    ],
)
def test_anything_but_arithmetic_is_an_argument_error(expression):
    with pytest.raises(ArgumentError):
        evaluate(expression)


def test_sizes_are_bounded():
    with pytest.raises(ToolError, match="too large"):
        evaluate("9 ** 9 ** 9")
    with pytest.raises(ToolError, match="too large"):
        evaluate("10.0 ** 400")
    with pytest.raises(ArgumentError, match="longer than"):
        evaluate("1+" * 400 + "1")
    with pytest.raises(ToolError, match="not a real number"):
        evaluate("(-8) ** 0.5")


def test_never_uses_eval(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("eval must not be used")

    monkeypatch.setattr(builtins, "eval", forbidden)
    assert format_number(evaluate("6*7")) == "42"
