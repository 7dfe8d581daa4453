"""`calculator`: safe arithmetic on an expression string.

The expression is parsed with `ast` and only numbers, + - * / // % **, unary
minus/plus and parentheses are evaluated — never `eval`. Sizes are bounded
because the evaluation runs on the event loop and cannot be interrupted.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from agentstream.tools_catalog import CALCULATOR as CALCULATOR_SPEC
from agentstream.tools_catalog import CALCULATOR_SUPPORTED
from agentstream_tools.registry import Tool
from agentstream_tools.validation import ArgumentError, ToolError, shown

Number = int | float

MAX_EXPRESSION_CHARS = 500
MAX_INT_BITS = 10_000  # ~3000 digits: well under Python's int→str limit

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}

SUPPORTED = CALCULATOR_SUPPORTED


def _check_power(base: Number, exponent: Number) -> None:
    # An exact integer power has about exponent * bits(base) bits: refuse before computing it.
    if not (isinstance(base, int) and isinstance(exponent, int)):
        return  # float powers overflow with OverflowError instead
    if abs(base) > 1 and exponent * base.bit_length() > MAX_INT_BITS:
        raise ToolError("result too large")


def _checked(value: Any) -> Number:
    if isinstance(value, complex):
        raise ToolError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("result too large")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("result too large")
    return value  # type: ignore[no-any-return]


def _eval(node: ast.expr) -> Number:
    match node:
        case ast.Constant(value=int() | float() as value) if not isinstance(value, bool):  # not str, complex
            return value
        case ast.UnaryOp(op=op, operand=operand) if type(op) in _UNARY:
            return _checked(_UNARY[type(op)](_eval(operand)))
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
            a, b = _eval(left), _eval(right)
            if isinstance(op, ast.Pow):
                _check_power(a, b)
            try:
                return _checked(_BINARY[type(op)](a, b))
            except ZeroDivisionError:
                raise ToolError("division by zero") from None
            except OverflowError:
                raise ToolError("result too large") from None
    raise ArgumentError(f"unsupported element {type(node).__name__} in the expression: only {SUPPORTED}")


def evaluate(expression: str) -> Number:
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ArgumentError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return _eval(tree.body)
    except (SyntaxError, RecursionError, MemoryError):
        raise ArgumentError(f"not an arithmetic expression: {shown(expression)} (only {SUPPORTED})") from None


def format_number(value: Number) -> str:
    """Integral results print without '.0' (6*7 → 42, 6/3 → 2)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


async def calculator(args: dict[str, Any]) -> str:
    return format_number(evaluate(args["expression"]))


CALCULATOR = Tool.from_spec(CALCULATOR_SPEC, calculator)
