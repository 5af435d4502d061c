"""The ``calculator`` tool: arithmetic on numbers (:mod:`.arithmetic`, never ``eval``), and its review of the calls a
run makes to it against the request (:mod:`.review`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aeon_kernel import Register, Tool, hookimpl
from aeon_kernel.kit import Review
from aeon_plugins.calculator.arithmetic import MAX_EXPRESSION_LENGTH, evaluate
from aeon_plugins.calculator.numbers import evaluated, request_numbers
from aeon_plugins.calculator.operands import as_symbols
from aeon_plugins.calculator.review import review_calls

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "CalculatorTool",
    "as_symbols",
    "evaluate",
    "evaluated",
    "request_numbers",
    "review_calls",
]


class CalculatorTool(Tool):
    name: str = "calculator"
    description: str = "Evaluate an arithmetic expression such as '5 + 10' or '(2 + 3) * 4'."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "expression": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_EXPRESSION_LENGTH,
                # Numbers and operators only: a model constrained by this schema cannot write words here.
                "pattern": r"^[-+*/%^().0-9eE ]+$",
            }
        },
        "required": ["expression"],
        "additionalProperties": False,
    }
    output_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"expression": {"type": "string"}, "value": {"type": "number"}},
        "required": ["expression", "value"],
        "additionalProperties": False,
    }
    example: dict[str, Any] | None = {"expression": "5 + 10"}
    pure: bool = True

    def review(self, request: str, calls: Sequence[Mapping[str, Any]]) -> Review | None:
        """The calculator knows what arithmetic words mean: :func:`~aeon_plugins.calculator.review.review_calls`."""
        return review_calls(request, calls)

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        expression = kwargs["expression"]
        return {"expression": expression, "value": evaluate(expression)}


@hookimpl
def aeon_register_tools(register: Register) -> None:
    register("calculator", CalculatorTool)
