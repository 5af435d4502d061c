"""The ``calculator`` tool: exact arithmetic checked against a reference, and refusal of everything else."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import ToolError, ValidationError
from aeon_plugins.calculator import MAX_EXPRESSION_LENGTH, CalculatorTool, aeon_register_tools, evaluate

# --- a small expression language, rendered to text and evaluated independently ---

# Python precedence: + - < * // % < unary - < ** (** binds tighter than a unary minus on its left).
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2, "neg": 3, "**": 4}


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Neg:
    operand: Any


@dataclass(frozen=True)
class Bin:
    op: str
    left: Any
    right: Any


def _precedence(node: Any) -> int:
    if isinstance(node, Num):
        return 5
    if isinstance(node, Neg):
        return _PRECEDENCE["neg"]
    return _PRECEDENCE[node.op]


def render(node: Any, power: str = "**") -> str:
    """Text with only the parentheses precedence requires, so the parser's precedence is what gets tested."""
    if isinstance(node, Num):
        return str(node.value)
    if isinstance(node, Neg):
        inner = render(node.operand, power)
        return "-" + (f"({inner})" if _precedence(node.operand) < _PRECEDENCE["neg"] else inner)
    mine = _PRECEDENCE[node.op]
    left, right = render(node.left, power), render(node.right, power)
    if node.op == "**":  # right-associative: parenthesise a left operand of equal or lower precedence
        left_parens = _precedence(node.left) <= mine
        right_parens = _precedence(node.right) < mine
    else:  # left-associative
        left_parens = _precedence(node.left) < mine
        right_parens = _precedence(node.right) <= mine
    left = f"({left})" if left_parens else left
    right = f"({right})" if right_parens else right
    return f"{left} {power if node.op == '**' else node.op} {right}"


class DivisionByZero(Exception):
    pass


def reference(node: Any) -> int:
    """Exact integer value of the tree, computed without parsing any text."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Neg):
        return -reference(node.operand)
    left, right = reference(node.left), reference(node.right)
    if node.op == "+":
        return left + right
    if node.op == "-":
        return left - right
    if node.op == "*":
        return left * right
    if node.op == "**":
        return int(left**right)  # right is a literal 0..3, so this stays an exact int
    if right == 0:
        raise DivisionByZero
    # Floor division and modulo as Python defines them, derived from exact fractions.
    quotient = math.floor(Fraction(left, right))
    return quotient if node.op == "//" else left - right * quotient


numbers = st.builds(Num, st.integers(min_value=0, max_value=30))


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(Neg, children),
        st.builds(Bin, st.sampled_from(["+", "-", "*", "//", "%"]), children, children),
        st.builds(Bin, st.just("**"), children, st.builds(Num, st.integers(min_value=0, max_value=3))),
    )


expressions = st.recursive(numbers, _extend, max_leaves=8)


@given(expressions, st.sampled_from(["**", "^"]))
def test_integer_expressions_match_an_exact_reference(tree: Any, power: str) -> None:
    text = render(tree, power)
    try:
        expected = reference(tree)
    except DivisionByZero:
        with pytest.raises(ToolError, match="division by zero"):
            evaluate(text)
        return
    result = evaluate(text)
    assert result == expected
    assert type(result) is int


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6).filter(bool))
def test_true_division_is_correctly_rounded_and_integral_results_are_ints(a: int, b: int) -> None:
    result = evaluate(f"{a} / {b}")
    exact = Fraction(a, b)
    if exact.denominator == 1:
        assert result == exact
        assert type(result) is int
    else:
        assert type(result) is float
        assert result == float(exact)


@given(st.lists(st.tuples(st.integers(-99, 99), st.integers(1, 99)), min_size=1, max_size=6))
def test_sums_of_fractions_are_close_to_the_exact_value(terms: list[tuple[int, int]]) -> None:
    text = " + ".join(f"({n}) / {d}" for n, d in terms)
    exact = sum((Fraction(n, d) for n, d in terms), Fraction(0))
    assert math.isclose(evaluate(text), float(exact), rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("10 - 4 - 3", 3),
        ("100 / 10 / 5", 2),
        ("2 ** 3 ** 2", 512),
        ("2 ^ 3 ^ 2", 512),
        ("2^10", 1024),
        ("-2 ** 2", -4),
        ("(-2) ** 2", 4),
        ("-3 + 5", 2),
        ("--3", 3),
        ("+7", 7),
        ("-(2 + 3) * 2", -10),
        ("7 // 2", 3),
        ("-7 // 2", -4),
        ("-7 % 3", 2),
        ("2 ** -1", 0.5),
        ("1.5 * 2", 3),
        ("0.1 + 0.2", 0.1 + 0.2),
        ("7 / 2", 3.5),
        ("2 ** 0.5", math.sqrt(2)),
        ("1_000 + 1", 1001),
        ("6 × 7", 42),  # noqa: RUF001 - the multiplication sign is accepted on purpose
        ("8 ÷ 2", 4),
    ],
)
def test_known_values(expression: str, expected: float) -> None:
    result = evaluate(expression)
    assert result == expected
    assert type(result) is type(expected)


def test_integral_floats_become_ints_but_huge_floats_stay_floats() -> None:
    assert type(evaluate("4.0")) is int
    big = evaluate("2.0 ** 60")
    assert type(big) is float  # beyond 2**53 an int would claim a precision the float never had
    assert big == 2.0**60
    assert evaluate("2 ** 60") == 2**60  # int arithmetic stays exact


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "__import__('os').system('true')",
        "a + 1",
        "x",
        "(1).__class__",
        "(1).__class__.__bases__",
        "abs(-1)",
        "[1, 2]",
        "(1, 2)",
        "{1: 2}",
        "'a' * 3",
        "b'a'",
        "1j",
        "True + 1",
        "None",
        "1 < 2",
        "1 if 1 else 2",
        "lambda: 1",
        "[x for x in (1,)]",
        "1 & 3",
        "1 << 3",
        "~1",
        "not 1",
        "(y := 3)",
        "f'{1}'",
        "...",
    ],
)
def test_anything_but_arithmetic_is_refused(expression: str) -> None:
    with pytest.raises(ToolError):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["", "   ", "1 +", "2 * * 3", "1; 2", "import os", "1 = 1", "(((1)"])
def test_syntax_errors_are_tool_errors(expression: str) -> None:
    with pytest.raises(ToolError, match="not an arithmetic expression"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["1 / 0", "1 // 0", "1 % 0", "1.5 / 0.0", "0 ** -1", "5 / (3 - 3)"])
def test_division_by_zero(expression: str) -> None:
    with pytest.raises(ToolError, match="division by zero"):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "9**9**9",
        "9^9^9",
        "2 ** 1000",
        "2 ** -1000",
        "10 ** 400",
        "(10 ** 300) ** 512",
        "1e300 * 10",
        "1e308 * 1e308",
    ],
)
def test_huge_results_are_refused(expression: str) -> None:
    with pytest.raises(ToolError, match=r"too large|limited"):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression", ["1e999", "1e999 - 1e999", "(1e999 - 1e999) ** 0", "1 / 1e999", "-1e999"]
)
def test_infinite_literals_are_refused(expression: str) -> None:
    # 1e999 parses as float('inf'); inf - inf is nan, and nan ** 0 == 1.0, which used to come back as 1.
    with pytest.raises(ToolError, match="too large"):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["(-8) ** 0.5", "(-1) ** 0.5"])
def test_complex_results_are_refused(expression: str) -> None:
    with pytest.raises(ToolError, match="not a real number"):
        evaluate(expression)


def test_length_limit() -> None:
    at_limit = "1+" * ((MAX_EXPRESSION_LENGTH - 1) // 2) + "1"
    at_limit += "0" * (MAX_EXPRESSION_LENGTH - len(at_limit))
    assert len(at_limit) == MAX_EXPRESSION_LENGTH
    assert evaluate(at_limit) == int(at_limit.split("+")[-1]) + at_limit.count("+")
    with pytest.raises(ToolError, match=f"longer than {MAX_EXPRESSION_LENGTH}"):
        evaluate(at_limit + "1")


def test_deep_nesting_is_refused_cleanly_and_long_unary_chains_work() -> None:
    with pytest.raises(ToolError):
        evaluate("(" * 240 + "1" + ")" * 240)
    assert evaluate("-" * 198 + "1") == 1  # an even number of minus signs, within MAX_EXPRESSION_LENGTH


@pytest.mark.parametrize(
    "template",
    [
        "open({path!r}, 'w')",
        "__import__('pathlib').Path({path!r}).touch()",
        "1 + open({path!r}, 'w').write('x')",
        "2 ** 3 * __import__('builtins').open({path!r}, 'w').close()",
    ],
)
def test_code_is_never_executed(tmp_path: Any, template: str) -> None:
    target = tmp_path / "pwned"
    tool = CalculatorTool()
    with pytest.raises(ToolError):
        tool.invoke(expression=template.format(path=str(target)))
    assert not target.exists()


# --- the tool wrapper ---


@given(expressions)
def test_the_tool_validates_its_own_inputs_and_results(tree: Any) -> None:
    tool = CalculatorTool()
    arguments = {"expression": render(tree)}
    assert tool.validate_input(**arguments)
    try:
        result = tool.invoke(**arguments)
    except ToolError:
        return
    assert result == {"expression": arguments["expression"], "value": evaluate(arguments["expression"])}
    assert tool.validate_output(result)


@pytest.mark.parametrize(
    "arguments",
    [{}, {"expression": ""}, {"expression": 5}, {"expression": "1", "extra": 1}, {"expr": "1"}],
)
def test_input_schema_rejects_bad_arguments(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as info:
        CalculatorTool().validate_input(**arguments)
    assert info.value.errors


def test_input_schema_rejects_overlong_expressions() -> None:
    with pytest.raises(ValidationError, match="too long"):
        CalculatorTool().validate_input(expression="1" * (MAX_EXPRESSION_LENGTH + 1))


@pytest.mark.parametrize("result", [{"expression": "1"}, {"expression": "1", "value": "1"}, {"value": 1}])
def test_output_schema_rejects_bad_results(result: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CalculatorTool().validate_output(result)


def test_registered_under_its_own_name() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_tools(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["calculator"]
    tool = registered[0][1]()
    assert tool.name == "calculator"
    assert tool.invoke(expression="5 + 10") == {"expression": "5 + 10", "value": 15}
    assert tool.example is not None
    assert tool.validate_input(**tool.example)
