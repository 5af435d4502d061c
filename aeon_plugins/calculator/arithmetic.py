"""The calculator's arithmetic: an expression evaluated by walking its AST (never ``eval``).

Only number literals, ``+ - * / // % **`` and unary ``+ -`` are accepted; anything else (names, calls,
attributes) is refused before evaluation. Exponents and results are bounded so that an expression such as
``9**9**9`` cannot exhaust the machine.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any, Final, cast

from aeon_kernel import ToolError

MAX_EXPRESSION_LENGTH: Final = 200
MAX_EXPONENT: Final = 512
MAX_MAGNITUDE: Final = 1e300

_BINARY: Final[dict[type[ast.operator], Callable[[Any, Any], Any]]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: Final[dict[type[ast.unaryop], Callable[[Any], Any]]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def parse(expression: str) -> ast.Expression:
    """The expression's syntax tree, ``^``, ``\u00d7`` and ``\u00f7`` read as ``**``, ``*`` and ``/`` (what the
    calculator runs, and what its review reads)."""
    return ast.parse(expression.replace("^", "**").replace("\u00d7", "*").replace("\u00f7", "/"), mode="eval")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely. Raises ToolError with the reason when it cannot."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ToolError(f"expression longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = parse(expression)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ToolError(f"not an arithmetic expression: {expression!r} ({type(exc).__name__})") from None
    try:
        value = _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (OverflowError, RecursionError):
        raise ToolError("the result is too large") from None
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > MAX_MAGNITUDE:
        raise ToolError("the result is too large")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _eval(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        number = cast("int | float", node.value)
        if not math.isfinite(number):
            raise ToolError("the number is too large")  # a literal such as 1e999 parses as inf
        return number
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))  # type: ignore[no-any-return]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > MAX_EXPONENT or abs(left) > MAX_MAGNITUDE):
            raise ToolError(f"exponents are limited to {MAX_EXPONENT}")
        result = _BINARY[type(node.op)](left, right)
        if isinstance(result, complex) or abs(result) > MAX_MAGNITUDE:
            raise ToolError("the result is too large or not a real number")
        return result  # type: ignore[no-any-return]
    raise ToolError(f"only numbers and + - * / // % ** are allowed, found {type(node).__name__}")
