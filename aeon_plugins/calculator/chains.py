"""A plan's calls read as one calculation, and spoken chains of operations.

A step-wise plan computes its answer over several calls, each using an earlier one's result: ``11 + 4`` then
``15 * 3``. Read as one expression (``(11 + 4) * 3``), the plan can be checked as a whole: every number the
request states reaches the answer (``11 * 3`` after ``11 + 4`` leaves the 4 behind), and a spoken chain ("100
minus 30 minus 20", "7 times 8 minus 6") is worked out as it is written, left to right with the usual precedence,
whether in one call or over several (``30 - 20`` then ``100 - 10`` is not "100 minus 30 minus 20").
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Sequence
from typing import Final, NamedTuple

from aeon_plugins.calculator.arithmetic import parse
from aeon_plugins.calculator.numbers import evaluated, is_in, request_numbers, shares, written
from aeon_plugins.calculator.operands import INFIX, INFIX_LINK, masked, nodes, worked_out

#: three or more numbers joined by infix words, the request's numbers written as ``#i#``; not the tail of a
#: longer wording ("the sum of 3 and 4 minus 2 minus 1") nor followed by words that bind tighter ("squared")
_CHAIN: Final = re.compile(
    rf"(?<!\bof )(?<!\band )(?<!\bby )(?<!\bthan )(?<!, )#\d+#(?:{INFIX_LINK}#\d+#){{2,}}+"
    r"(?!\s*(?:squared|cubed|%|per\s?cent|to\b))",
    re.IGNORECASE,
)


class Chain(NamedTuple):
    """A spoken chain of operations: what it says, as an expression, its numbers and its value."""

    said: str
    operands: tuple[float, ...]
    value: float


def chains(request: str) -> list[Chain]:
    """Each spoken chain of three or more numbers in ``request`` ("100 minus 30 minus 20"), none a percentage."""
    text, spans = masked(request)
    found = []
    for match in _CHAIN.finditer(text):
        pieces = re.split(INFIX_LINK, match.group(), flags=re.IGNORECASE)
        numbers = [spans[int(piece.strip("#"))] for piece in pieces[::2]]
        if any(percent for *_, percent in numbers):
            continue
        symbols = [INFIX[" ".join(word.lower().split())] for word in pieces[1::2]]
        said = written(numbers[0][2]) + "".join(
            f" {symbol} {written(number[2])}" for symbol, number in zip(symbols, numbers[1:], strict=True)
        )
        value = evaluated(said)
        if value is not None:
            found.append(Chain(said, tuple(number[2] for number in numbers), value))
    return found


def breaks(expression: str, chain: Chain) -> bool | None:
    """True when a part of ``expression`` combines exactly the chain's numbers into another value (``100 - (30 -
    20)``), False when one gives the chain's value, None when no part combines exactly its numbers."""
    wanted, broken = sorted(chain.operands), False
    for found in nodes(expression):
        leaves = sorted(
            float(leaf.value)
            for leaf in ast.walk(found.op)
            if isinstance(leaf, ast.Constant) and isinstance(leaf.value, (int, float))
        )
        if len(leaves) == len(wanted) and all(map(math.isclose, leaves, wanted)):
            value = worked_out(found.op)
            if value is not None and math.isclose(value, chain.value, rel_tol=1e-9):
                return False
            broken = True
    return True if broken else None


def composed(
    expressions: Sequence[str], values: Sequence[float | None], stated: Sequence[float]
) -> str | None:
    """The last call's expression with each earlier result it uses written out as the call that gave it
    (``11 + 4``, ``15 * 3``: ``(11 + 4) * 3``). A number the request states is taken as stated, as many times as
    the request states it (``2 + 3``, ``5 * 5`` for "... then multiply the result by 5": one 5 is the result).
    None when a call cannot be read."""
    trees: list[ast.expr] = []
    for expression in expressions:
        try:
            tree = parse(expression).body
        except (SyntaxError, ValueError, RecursionError):
            return None
        trees.append(_Inline(trees, values, stated).visit(tree))
    return ast.unparse(trees[-1]) if trees else None


class _Inline(ast.NodeTransformer):
    """Writes out, in a call's tree, each number that is an earlier call's result, beyond the times the request
    states it."""

    def __init__(self, earlier: Sequence[ast.expr], values: Sequence[float | None], stated: Sequence[float]):
        self.earlier, self.values, self.stated = earlier, values, list(stated)

    def visit_Constant(self, node: ast.Constant) -> ast.expr:
        if not isinstance(node.value, (int, float)):
            return node
        same = next((i for i, s in enumerate(self.stated) if math.isclose(node.value, s)), None)
        if same is not None:
            del self.stated[same]  # taken as stated, once
            return node
        for tree, value in zip(
            reversed(self.earlier), reversed(self.values[: len(self.earlier)]), strict=True
        ):
            if value is not None and math.isclose(node.value, value, rel_tol=1e-9):
                return tree
        return node


def reaching(numbers: Sequence[Sequence[float]], values: Sequence[float | None]) -> list[int]:
    """The calls whose results reach the last call's (it uses their value, or a call that does), in order."""
    reached = {len(numbers) - 1} if numbers else set()
    for i in range(len(numbers) - 1, -1, -1):
        if i in reached:
            reached |= {j for j in range(i) if (value := values[j]) is not None and is_in(value, numbers[i])}
    return sorted(reached)


def unreached(
    read_calls: Sequence[tuple[tuple[float, ...], list[str]]],
    reaching: Sequence[int],
    stated: Sequence[tuple[int, float, bool]],
    last: str,
) -> list[str]:
    """A number the request states that a call uses but that never reaches the answer (``11 * 3`` after ``11 +
    4``: the 4 is left behind)."""
    used = [n for numbers, _ in read_calls for n in numbers]
    reached = [n for i in reaching for n in read_calls[i][0]]
    findings = []
    for _, value, percent in stated:
        forms = (value, *shares(value)) if percent else (value,)
        if any(is_in(f, used) for f in forms) and not any(is_in(f, reached) for f in forms):
            findings.append(
                f"The request's {written(value)} never reaches the answer: the last calculation ({last!r}) "
                "does not build on the one that uses it."
            )
    return findings


def grouped_otherwise(expressions: Sequence[str], values: Sequence[float | None], request: str) -> list[str]:
    """A spoken chain ("100 minus 30 minus 20") that the calls, read as one calculation, group otherwise."""
    said = chains(request)
    answer = (
        composed(expressions, values, [value for _, value, _ in request_numbers(request)]) if said else None
    )
    findings = []
    for chain in said:
        ways = [breaks(expression, chain) for expression in (*expressions, *([answer] if answer else []))]
        if True in ways and False not in ways:
            findings.append(
                f"The request says {chain.said}, which is {written(chain.value)} worked out as it is said; the "
                "calculation groups it otherwise."
            )
    return findings
