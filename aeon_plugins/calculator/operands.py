"""What the request says about an operation's operands, and whether an expression does it: an operation named
with its operands ("the product of 11 and 3", "increase 50 by 20") combines exactly those numbers; one worded with
its operands in order ("subtract 4 from 10", "30 divided by 5") is not done the other way round; "halve", "double",
"triple" and "the square root" are done as such, not by any multiplication or power."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Final, NamedTuple

from aeon_plugins.calculator.arithmetic import parse
from aeon_plugins.calculator.numbers import NUMBER_WORDS, evaluated, number_spans, request_numbers, written

#: "the sum of 5, 10 and 15", "the difference between 100 and 37": an operation named with its own operands
_OF_LIST: Final = re.compile(
    r"\b(sum|total|product|difference|quotient|average|mean)\s+(?:of|between)\s+", re.IGNORECASE
)
#: the operator that each of those names applies to its operands (an average sums them, then divides)
_LIST_OPERATORS: Final[dict[str, type[ast.operator]]] = {
    "sum": ast.Add, "total": ast.Add, "average": ast.Add, "mean": ast.Add,
    "product": ast.Mult, "difference": ast.Sub, "quotient": ast.Div,
}  # fmt: skip
_LIST_TOKEN: Final = re.compile(r"[a-z]+|\d[\d,]*(?:\.\d+)?|\S")


class _Binding(NamedTuple):
    """An operation the request names with its operands: "the product of 11 and 3", "increase 50 by 20"."""

    said: str
    operator: type[ast.operator]
    operands: tuple[float, ...]
    #: exactly these operands ("the product of 11 and 3"), or these among others ("multiply 3 by 4 and double it")
    exact: bool = True
    #: the name the request gives the operation ("product", "average"), when it names one
    name: str = ""

    @property
    def value(self) -> float | None:
        """What the named operation gives ("the product of 7 and 6": 42), None when it names none."""
        values = self.operands
        if self.name in ("sum", "total"):
            return math.fsum(values)
        if self.name in ("average", "mean"):
            return math.fsum(values) / len(values)
        if self.name == "product":
            return math.prod(values)
        if self.name == "difference" and len(values) == 2:
            return abs(values[0] - values[1])
        if self.name == "quotient" and len(values) == 2 and values[1]:
            return values[0] / values[1]
        return None


#: "increase 50 by 20", "reduce 80 by 15" (the request's numbers written as ``#i#``; a percentage is a share, so
#: those wordings are not bound): the operation and the two operands, in order
_BY_WORDINGS: Final[tuple[tuple[re.Pattern[str], str, type[ast.operator]], ...]] = (
    (re.compile(r"\b(?:increase|raise)[sd]?\s+#(\d+)#\s+by\s+#(\d+)#", re.IGNORECASE), "to increase", ast.Add),
    (re.compile(r"\b(?:decrease[sd]?|reduce[sd]?|lower(?:s|ed)?)\s+#(\d+)#\s+by\s+#(\d+)#", re.IGNORECASE),
     "to reduce", ast.Sub),
)  # fmt: skip


#: "add 2 and 3", "add 5 to 10", "add up 5, 10 and 15", "multiply 25 by 4": a verb and the numbers it is given,
#: with the words that may join them; such a list may be part of a longer chain (``3 * 4 * 2``)
_VERB_LIST: Final = re.compile(r"\b(add(?:\s+up)?|sum|total|multiply)\s+(?=[\d a-z])", re.IGNORECASE)
_VERB_JOINS: Final = {"add": (",", "and", "to"), "multiply": (",", "and", "by")}


def _listed_after(text: str, at: int, joins: Sequence[str]) -> int:
    """Where a list of numbers that starts at ``at`` ends: numbers (digits or words) joined by ``joins``."""
    end = at
    for token in _LIST_TOKEN.finditer(text, at):
        word = token.group()
        if word[0].isdigit() or word in NUMBER_WORDS:
            end = token.end()
        elif word not in joins:
            break
    return end


def _phrases(text: str, stated: Sequence[tuple[int, float, bool]]) -> list[tuple[int, int, _Binding]]:
    """Where ``text`` (lowercase) names an operation with its operands, and the binding: "(the) sum of A and B",
    "add A and B", "multiply A by B"; two or more numbers it states, none a percentage."""
    listed = [
        (m, m.group(1), _LIST_OPERATORS[m.group(1)], (",", "and", "-"), True) for m in _OF_LIST.finditer(text)
    ]
    for match in _VERB_LIST.finditer(text):
        verb = "multiply" if match.group(1) == "multiply" else "add"
        listed.append((match, verb, ast.Mult if verb == "multiply" else ast.Add, _VERB_JOINS[verb], False))
    found = []
    for match, name, operator, joins, exact in listed:
        end = _listed_after(text, match.end(), joins)
        operands = [(value, percent) for start, value, percent in stated if match.end() <= start < end]
        if len(operands) >= 2 and not any(percent for _, percent in operands):
            values = tuple(value for value, _ in operands)
            *first, last = [written(v) for v in values]
            said = f"for the {name} of" if exact else f"to {name}"
            said = f"{said} {', '.join(first)} and {last}"
            start = match.start() - 4 if text.endswith("the ", 0, match.start()) else match.start()
            found.append((start, end, _Binding(said, operator, values, exact, name)))
    return found


def bindings(request: str, stated: Sequence[tuple[int, float, bool]]) -> list[_Binding]:
    """Each "sum of A and B" (product, difference, quotient, average; "between" too), "add A and B", "multiply A
    by B" of ``request`` whose operands are two or more numbers it states; a percentage is no such operand."""
    found = [binding for _, _, binding in _phrases(request.lower(), stated)]
    text, spans = masked(request)
    for pattern, verb, operator in _BY_WORDINGS:
        for match in pattern.finditer(text):
            first_span, by = spans[int(match.group(1))], spans[int(match.group(2))]
            if not (first_span[3] or by[3]):
                said = f"{verb} {written(first_span[2])} by {written(by[2])}"
                found.append(_Binding(said, operator, (first_span[2], by[2])))
    return found


def combines(expression: str, binding: _Binding) -> bool:
    """Whether ``expression`` applies the binding's operator to exactly its operands: one chain of that operator
    (``5 + 10 + 15``) whose parts are those numbers, any order for a sum or a product; a quotient in the order
    named (a power too), a difference the larger first ("the difference of 4 and 9" is 5, not -5)."""
    ordered = binding.operator in (ast.Div, ast.Sub, ast.Pow)
    wanted = list(binding.operands) if ordered else sorted(binding.operands)
    if binding.name == "difference":
        wanted = sorted(binding.operands, reverse=True)
    for found in nodes(expression):
        if isinstance(found.op.op, binding.operator):
            parts = _chain(found.op, binding.operator)
            values = [v for part in parts if (v := worked_out(part)) is not None]
            given = values if ordered else sorted(values)
            if len(parts) != len(given):
                continue
            if binding.exact and len(given) == len(wanted) and all(map(math.isclose, given, wanted)):
                return True
            if not binding.exact and _contains(given, wanted):
                return True
    return False


def _contains(values: Sequence[float], wanted: Sequence[float]) -> bool:
    """Whether ``values`` hold each of ``wanted`` (as many times as it is wanted)."""
    left = list(values)
    for value in wanted:
        match = next((i for i, v in enumerate(left) if math.isclose(v, value)), None)
        if match is None:
            return False
        left.pop(match)
    return True


def _chain(node: ast.expr, operator: type[ast.operator]) -> list[ast.expr]:
    """The parts a chain of one associative operator combines: ``(5 + 10) + 15`` combines 5, 10 and 15. Only a
    sum or a product is a chain; a difference or a quotient has two parts."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, operator):
        if operator in (ast.Add, ast.Mult):
            return _chain(node.left, operator) + _chain(node.right, operator)
        return [node.left, node.right]
    return [node]


#: wordings that say which way round an operation goes, the request's numbers written as ``#i#``: each gives the
#: operator, and whether the first number named is its right operand ("subtract 4 from 10": 10 - 4)
_ORDERED_WORDINGS: Final[tuple[tuple[re.Pattern[str], str, bool], ...]] = tuple(
    (re.compile(pattern.replace("A", r"#(\d+)#").replace("B", r"#(\d+)#"), re.IGNORECASE), symbol, swapped)
    for pattern, symbol, swapped in (
        (r"\b(?:subtract|deduct)(?:s|ed|ing)?\s+A\s+from\s+B", "-", True),
        (r"\bfrom\s+A,?\s+(?:subtract|deduct|take\s+away)\s+B", "-", False),
        (r"\btak(?:e|es|ing)\s+(?:away\s+)?A\s+(?:away\s+)?from\s+B", "-", True),
        (r"\bremov(?:e|es|ing)\s+A\s+from\s+B", "-", True),
        (r"A\s+(?:less|fewer)\s+than\s+B", "-", True),
        (r"A\s+(?:minus|less|take\s+away)\s+B(?!\s*#)", "-", False),
        (r"\bdivid(?:e|es|ing)\s+A\s+(?:by|among|between|across)\s+B", "/", False),
        (r"A\s+divided\s+(?:by|among|between)\s+B", "/", False),
        (
            r"\b(?:split|share[sd]?|shar(?:es|ing))\s+A(?:\s+[a-z]+){0,2}?\s+(?:among|between|by)\s+B",
            "/",
            False,
        ),
        (r"A\s+(?:split|shared)\s+(?:equally\s+|evenly\s+)?(?:among|between|across)\s+B", "/", False),
        (r"\b(?:reduce[sd]?|decrease[sd]?|lower(?:s|ed)?)\s+A\s+by\s+B", "-", False),
        (r"A\s?s?\s+(?:go|goes|fit|fits)\s+into\s+B", "/", True),
        (r"A\s+(?:raised\s+)?to\s+the\s+power\s+of\s+B", "^", False),
        (r"A\s+(?:raised\s+)?to\s+the\s+B(?:st|nd|rd|th)\s+power", "^", False),
        (r"\bhow\s+many\s+A\s?s?\s+(?:are\s+)?(?:there\s+)?in\s+B", "/", True),
        (r"A\s+over\s+B", "/", False),
        (r"A\s+exceed(?:s|ed)?\s+B", "-", False),
        (r"\b(?:split|divide[sd]?|cut|shar(?:e|es|ed))\s+A(?:\s+[a-z]+){0,3}?\s+into\s+B", "/", False),
        (r"A(?:\s+[a-z]+){0,2}?\s+(?:split|share)\s+(?:an?\s+|the\s+|their\s+)?B", "/", True),
        (r"\btak(?:e|es|ing)\s+A\s+off\s+(?:of\s+)?B", "-", True),
        (r"A\s+(?:taken|subtracted|deducted)\s+(?:away\s+)?from\s+B", "-", True),
        (
            r"\bhow\s+much\s+(?:more|bigger|larger|greater|higher|taller|older|longer)\s+(?:is|are|was)\s+A\s+than\s+B",
            "-",
            False,
        ),
        (
            r"\bhow\s+many\s+times\s+(?:more|bigger|larger|greater)\s+(?:is|are|was)\s+A\s+than\s+B",
            "/",
            False,
        ),
    )
)
#: words for an earlier result: "it", "the total", "what remains", "what you get"
_EARLIER: Final = (
    r"(?:it|that|this|them|the\s+[a-z]+|what(?:'s|\s+is)\s+left"
    r"|what\s+(?:remains|(?:you|we|I)\s+(?:get|got|have)))"
)
#: a unit of money after an amount ("a 10 dollar discount")
_MONEY: Final = r"(?:dollars?|euros?|pounds?|cents?|bucks?|yen)"
#: wordings that apply an operation to an earlier result, with its other operand: "then subtract 12", "divide it
#: by 5", "take 11 off", ", plus 20" (the earlier result is the left operand), "subtract it from 100" (the right)
_RESULT_FIRST: Final[tuple[tuple[re.Pattern[str], str, bool], ...]] = tuple(
    (re.compile(pattern.replace("B", r"#(\d+)#").replace("R", _EARLIER), re.IGNORECASE), symbol, left)
    for pattern, symbol, left in (
        (r"\b(?:subtract|deduct)(?:s|ed|ing)?\s+B(?!\s*(?:from|,|and|#))", "-", True),
        (r"\b(?:subtract|deduct|take)(?:s|ed|ing)?\s+(?:away\s+)?B\s+(?:away\s+)?from\s+R\b", "-", True),
        (r"\btake\s+away\s+B(?!\s*(?:from|,|and|#))", "-", True),
        (r"\btake\s+B\s+away(?!\s+from)", "-", True),
        (r"\b(?:take|knock)\s+B\s+off(?!\s+(?:of\s+)?#)", "-", True),
        (r"\bknock\s+off\s+B", "-", True),
        (r"\bspen(?:d|ds|t|ding)\s+B(?:\s+[a-z]+){0,2}?\s+of\s+(?:it|that|them)\b", "-", True),
        (r"(?:,|\bthen|\band)\s+minus\s+B", "-", True),
        (r"(?:,|\bthen|\band)\s+plus\s+B", "+", True),
        (r"(?:,|\bthen|\band)\s+(?:[a-z]+\s+){0,4}?B\s+more\b(?!\s+than)", "+", True),
        (r"(?:,|\bthen|\band)\s+divided\s+by\s+B", "/", True),
        (r"(?:,|\bthen|\band)\s+add\s+B(?!\s*(?:to|and|,|#))", "+", True),
        (r"(?:,|\bthen|\band)\s+(?:multiply\s+(?:R\s+)?by|times)\s+B", "*", True),
        (r"\bdivid(?:e|es|ing)\s+(?:R\s+)?by\s+B", "/", True),
        (r"\bsplit\s+(?:R\s+)?(?:into|among|between)\s+B", "/", True),
        (r"\braise\s+R\s+to\s+the\s+power\s+of\s+B", "^", True),
        (r"\b(?:subtract|deduct|take)(?:s|ed|ing)?\s+R\s+(?:away\s+)?from\s+B", "-", False),
        # an amount taken off a price: "a 10 dollar discount", "a $7 coupon", "a discount of 5", "12 euros off"
        (rf"B\s+(?:{_MONEY}\s+)?(?:discount|coupon|voucher|rebate)\b", "-", True),
        (r"\b(?:discount|coupon|voucher|rebate)\s+(?:of|for|worth)\s+\$?B", "-", True),
        (rf"B\s+{_MONEY}\s+off\b", "-", True),
    )
)
#: a word for an operation, before a wording that applies another one to its result
_OPERATION: Final = re.compile(
    r"\b(?:add|plus|sum|subtract|minus|multipl\w*|times|divid\w*|double|twice|halve|square|cube|increase|reduce"
    r"|per\s?cent|each|together)\b|%",
    re.IGNORECASE,
)
#: the operators that do what an order names ("the remainder of 50 divided by 7": 50 % 7 is a division too)
_ORDERED_OPERATORS: Final[dict[str, tuple[type[ast.operator], ...]]] = {
    "-": (ast.Sub,), "/": (ast.Div, ast.Mod, ast.FloorDiv), "^": (ast.Pow,), "+": (ast.Add,), "*": (ast.Mult,),
}  # fmt: skip
#: words before a spoken number that bind it to something else than the pair that follows: a chain ("100 minus 30
#: minus 20", see :mod:`~aeon_plugins.calculator.chains`), a scaling ("half of 250 minus 25"), a list ("add 2 and 3")
_INFIX_BEFORE: Final = re.compile(
    r"(?:plus|minus|times|by|less|away|(?<!remainder )of|twice|double|triple|and)\s+$"
)
#: and words after the pair that make it part of a chain ("100 minus 30 plus 20")
_INFIX_AFTER: Final = re.compile(r"\s+(?:plus|minus|times|divided|multiplied|more\s+than)\b")


class _Order(NamedTuple):
    """An operation whose operands the request gives in a known order: ``left symbol right``; ``left`` (or
    ``right``) is None for an earlier result ("then subtract 12", "subtract it from 100")."""

    symbol: str
    left: float | None
    right: float | None
    #: an earlier operation of the request gives the result ("multiply it by 4 and subtract 6"): the earlier
    #: result's side is a calculation or an earlier call's value, not a number the request states
    of_result: bool = False

    @property
    def said(self) -> str:
        return f"{_side(self.left)} {self.symbol} {_side(self.right)}"

    @property
    def reversed(self) -> str:
        return f"{_side(self.right)} {self.symbol} {_side(self.left)}"


def _side(value: float | None) -> str:
    return "the result" if value is None else written(value)


_Span = tuple[int, int, float, bool]


def masked(request: str, phrases: bool = False) -> tuple[str, tuple[_Span, ...]]:
    """``request`` with its ``i``-th number written as ``#i#`` (to match wordings around numbers), and the numbers;
    with ``phrases``, an operation named with its operands ("the product of 7 and 6") is one number (42)."""
    spans = list(number_spans(request))
    if phrases:
        # a phrase's operands are no percentage (_phrases): it stands for one number
        named = [
            (start, end, binding.value)
            for start, end, binding in _phrases(request.lower(), request_numbers(request))
            if binding.exact
        ]
        for start, end, value in [*named, *_valued(request, spans)]:
            if value is not None:
                spans = [s for s in spans if not start <= s[0] < end]
                if all(s[1] <= start or s[0] >= end for s in spans):  # not inside a phrase already read
                    spans.append((start, end, value, False))
        spans.sort()
    parts, at = [], 0
    for index, (start, end, _, _) in enumerate(spans):
        parts += [request[at:start], f"#{index}#"]
        at = end
    return "".join([*parts, request[at:]]), tuple(spans)


#: after a number: a power ("9 squared"), or a share of the next number ("15 percent of 200")
_POWER_AFTER: Final = re.compile(r"\s+(squared|cubed)\b", re.IGNORECASE)
_SHARE_OF: Final = re.compile(r"\s*(?:%|per\s?cent)\s+of\s+(?:the\s+)?", re.IGNORECASE)


#: one operation on two numbers, written in brackets: "(5 - 5)"
BRACKETED: Final = re.compile(r"\(\s*\d+(?:\.\d+)?\s*[-+*/^]\s*\d+(?:\.\d+)?\s*\)")


def works_out(expression: str, group: str) -> bool:
    """Whether ``expression`` applies the operation of a :data:`BRACKETED` ``group`` ("(5 - 5)") to its two
    numbers, in its order (any order for a sum or a product): :func:`combines` with the group as its binding."""
    (wanted,) = nodes(group)
    operands = (wanted.left or 0.0, wanted.right or 0.0)
    return combines(expression, _Binding(group, type(wanted.op.op), operands))


def _valued(request: str, spans: Sequence[_Span]) -> list[tuple[int, int, float | None]]:
    """Numbers named with what is done to them, each one number: "9 squared" (81), "15 percent of 200" (30), "(5 -
    5)" (0)."""
    found: list[tuple[int, int, float | None]] = [
        (group.start(), group.end(), evaluated(group.group())) for group in BRACKETED.finditer(request)
    ]
    for i, (start, end, value, percent) in enumerate(spans):
        if not percent and (power := _POWER_AFTER.match(request, end)):
            found.append((start, power.end(), value ** (2 if power.group(1).lower() == "squared" else 3)))
        share = _SHARE_OF.match(request, end)
        if percent and share and i + 1 < len(spans) and spans[i + 1][0] == share.end():
            found.append((start, spans[i + 1][1], value * spans[i + 1][2] / 100))
    return found


def orders(request: str) -> list[_Order]:
    """The operations ``request`` names with their operands in a known order ("subtract 4 from 10", "30 divided
    by 5", "take 4 away from the product of 7 and 6", "then subtract 12"); a percentage is no such operand. In a
    spoken chain ("100 minus 30 minus 20") only the first pair is such an operation (see :func:`chains`)."""
    text, spans = masked(request, phrases=True)
    numbers = {span[:2] for span in number_spans(request)}  # the rest of the spans are phrases
    found = []
    for pattern, symbol, swapped in _ORDERED_WORDINGS:
        for match in pattern.finditer(text):
            first, second = spans[int(match.group(1))], spans[int(match.group(2))]
            chained = _INFIX_AFTER.match(text, match.end()) or (
                not swapped and _INFIX_BEFORE.search(text, 0, match.start())
            )
            if first[3] or second[3] or (chained and not swapped):  # a spoken chain: see :func:`chains`
                continue
            left, right = (second[2], first[2]) if swapped else (first[2], second[2])
            if chained:  # "15 less than 4 times 10": 15 comes off 4 * 10
                tail = _TAIL.match(text, match.end())
                said = written(left) + (text[match.end() : tail.end()] if tail else "")
                if (chain := _spoken(said, spans)) is None:
                    continue
                left = chain
            found.append(_Order(symbol, left, right))
    for pattern, symbol, earlier_first in _RESULT_FIRST:
        for match in pattern.finditer(text):
            if not spans[int(match.group(1))][3]:
                # the earlier result is a calculation when an operation, two numbers or a phrase come before
                before = [spans[int(i)] for i in _MASKED.findall(text[: match.start()])]
                of_result = (
                    _OPERATION.search(text, 0, match.start()) is not None
                    or len(before) >= 2
                    or any(span[:2] not in numbers for span in before)
                )
                given = spans[int(match.group(1))][2]
                if earlier_first:
                    found.append(_Order(symbol, None, given, of_result))
                else:
                    found.append(_Order(symbol, given, None, of_result))
    return found


_MASKED: Final = re.compile(r"#(\d+)#")
#: infix words and the numbers they join, after a number: " times #3# minus #4#"
#: words between two numbers and what they do ("10 more than 3 times 4" adds 10 to 3 * 4); the chains' too
INFIX: Final = {
    "plus": "+", "more than": "+", "minus": "-", "times": "*", "multiplied by": "*", "divided by": "/",
}  # fmt: skip
INFIX_LINK: Final = r"\s+(plus|more\s+than|minus|times|multiplied\s+by|divided\s+by)\s+"
_TAIL: Final = re.compile(r"(?:\s+(?:plus|minus|times|multiplied\s+by|divided\s+by)\s+#\d+#)*", re.IGNORECASE)


def as_symbols(text: str) -> str:
    """``text`` with the :data:`INFIX` words between two terms written as their symbols ("6 times 7" → "6 * 7")."""
    return re.sub(
        INFIX_LINK, lambda word: f" {INFIX[' '.join(word.group(1).lower().split())]} ", text, flags=re.I
    )


def _spoken(said: str, spans: Sequence[_Span]) -> float | None:
    """The value of a spoken chain (its numbers written as ``#i#``, the first in digits), as it is said."""
    return evaluated(_MASKED.sub(lambda found: written(spans[int(found.group(1))][2]), as_symbols(said)))


def the_wrong_way_round(expression: str, order: _Order, stated: Sequence[float] = ()) -> bool | None:
    """True when ``expression`` applies the operation to the two numbers the wrong way round (``4 - 10`` for
    "subtract 4 from 10"; ``12 - 40`` for "then subtract 12"), False when it applies it the right way round, None
    when it does neither (``9 * (4 - 6)`` for "multiply 9 by 4 and subtract 6": 4 is ``stated``, not a result;
    ``300 * (5 + 20) / 100`` for "5 percent of 300, plus 20": 20 is added to 5, not to the percentage)."""
    operators, reversed_found = _ORDERED_OPERATORS[order.symbol], False

    def given(side: ast.expr) -> bool:
        number = worked_out(side) if isinstance(side, ast.Constant) else None
        return number is not None and any(math.isclose(number, s) for s in stated)

    wanted = order.right if order.right is not None else math.nan
    for found in nodes(expression):
        if not isinstance(found.op.op, operators) or found.left is None or found.right is None:
            continue
        # ", plus 20": 20 and the earlier result, in any order
        if order.left is None and order.symbol in "+*":
            parts = _chain(found.op, operators[0])
            values = [worked_out(part) for part in parts]
            for at in (i for i, v in enumerate(values) if v is not None and math.isclose(v, wanted)):
                rest = parts[:at] + parts[at + 1 :]
                if rest and not (order.of_result and len(rest) == 1 and given(rest[0])):
                    return False
        elif order.right is None:  # "subtract it from 100": the earlier result on the right
            if math.isclose(found.left, order.left or 0.0) and not (
                order.of_result and given(found.op.right)
            ):
                return False
            reversed_found |= math.isclose(found.right, order.left or 0.0)
        elif order.left is None:  # the earlier result, whatever it is, on the left
            if math.isclose(found.right, wanted) and not (order.of_result and given(found.op.left)):
                return False
            reversed_found |= math.isclose(found.left, wanted)
        elif math.isclose(found.left, order.left) and math.isclose(found.right, wanted):
            return False
        else:
            reversed_found |= math.isclose(found.left, wanted) and math.isclose(found.right, order.left)
    return True if reversed_found else None


class _Node(NamedTuple):
    """An operation of an expression, with the values of its two sides (None where they cannot be worked out)."""

    op: ast.BinOp
    left: float | None
    right: float | None


@lru_cache(maxsize=512)
def nodes(expression: str) -> tuple[_Node, ...]:
    """Every operation of ``expression`` with the values of its sides; none when it cannot be read."""
    try:
        tree = parse(expression)
    except (SyntaxError, ValueError, RecursionError):
        return ()
    binary = (node for node in ast.walk(tree) if isinstance(node, ast.BinOp))
    return tuple(_Node(node, worked_out(node.left), worked_out(node.right)) for node in binary)


def worked_out(node: ast.expr) -> float | None:
    return evaluated(ast.unparse(node))


def scaled_by(factor: float, divisor: float | None = None) -> Callable[[_Node], bool]:
    """An operation that multiplies by ``factor`` (either side), or divides by ``divisor``."""

    def scales(found: _Node) -> bool:
        if isinstance(found.op.op, ast.Mult):
            return any(v is not None and math.isclose(v, factor) for v in (found.left, found.right))
        return isinstance(found.op.op, ast.Div) and found.right == divisor

    return scales


def _doubles(found: _Node) -> bool:
    """A multiplication by 2, or a sum that adds something twice (``6 + 6``, ``1 + 6 + 6``)."""
    if not isinstance(found.op.op, ast.Add):
        return scaled_by(2)(found)
    parts = [ast.dump(part) for part in _chain(found.op, ast.Add)]
    return len(set(parts)) < len(parts)


def _square_root(found: _Node) -> bool:
    return isinstance(found.op.op, ast.Pow) and found.right is not None and math.isclose(found.right, 0.5)


#: words that name a scaling, and what an expression must do for them: "halve" is a division by 2 (or a
#: multiplication by 0.5), not any multiplication; "the square root" is a power of 0.5, not any power
SCALINGS: Final[tuple[tuple[re.Pattern[str], str, Callable[[_Node], bool]], ...]] = (
    (re.compile(r"\bhalve[sd]?\b|\bhalf\s+of\b", re.IGNORECASE), "halve", scaled_by(0.5, 2)),
    (re.compile(r"\bdouble[sd]?\b|\btwice\b", re.IGNORECASE), "double", _doubles),
    (re.compile(r"\btriple[sd]?\b", re.IGNORECASE), "triple", scaled_by(3)),
    (re.compile(r"\bsquare\s+root\b", re.IGNORECASE), "take the square root", _square_root),
)


def does(expression: str, done: Callable[[_Node], bool]) -> bool:
    """Whether some operation of ``expression`` does what ``done`` asks."""
    return any(done(found) for found in nodes(expression))


def _numbers_worded(
    request: str, wordings: Sequence[tuple[Any, ...]], *, percent: bool
) -> list[tuple[float, tuple[Any, ...]]]:
    """Each number of ``request`` that a wording (a pattern around ``#i#``, then what it says) matches, a
    percentage or not as asked, with what the wording says."""
    text, spans = masked(request)
    found = []
    for pattern, *said in wordings:
        for match in pattern.finditer(text):
            span = spans[int(match.group(1))]
            if span[3] is percent:
                found.append((span[2], tuple(said)))
    return found


#: "12 squared", "square 11", "the square of 9", "5 cubed": a number raised to a power the words give
_POWERS: Final[tuple[tuple[re.Pattern[str], float], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), exponent)
    for pattern, exponent in (
        (r"#(\d+)#\s+squared\b", 2),
        (r"\bsquare(?:\s+of)?\s+#(\d+)#", 2),
        (r"#(\d+)#\s+cubed\b", 3),
        (r"\bcube(?:\s+of)?\s+#(\d+)#", 3),
    )
)


def powers(request: str) -> list[tuple[float, float]]:
    """Each number ``request`` squares or cubes, with the power: "12 squared minus 4" gives (12, 2)."""
    return [(value, exponent) for value, (exponent,) in _numbers_worded(request, _POWERS, percent=False)]


def raises(expression: str, base: float, exponent: float) -> bool:
    """Whether ``expression`` raises ``base`` to ``exponent`` (``12 ^ 2``, or ``12 * 12`` for a square)."""
    for found in nodes(expression):
        powered = isinstance(found.op.op, ast.Pow) and found.left is not None and found.right is not None
        if powered and math.isclose(found.left or 0.0, base) and math.isclose(found.right or 0.0, exponent):
            return True
        if isinstance(found.op.op, ast.Mult):
            parts = [worked_out(part) for part in _chain(found.op, ast.Mult)]
            if len(parts) == exponent and all(p is not None and math.isclose(p, base) for p in parts):
                return True
    return False


#: a percentage taken off or added on ("25% off", "reduce 200 by 15%", "increase 40 by 10 percent", "20%
#: more"), the request's numbers written as ``#i#``: each gives the direction (-1 off, +1 on)
_PERCENT_CHANGES: Final[tuple[tuple[re.Pattern[str], int], ...]] = tuple(
    (re.compile(pattern.replace("P", r"#(\d+)#\s*(?:%|per\s?cent)"), re.IGNORECASE), direction)
    for pattern, direction in (
        (r"P\s+(?:off|discount|less|cheaper)\b", -1),
        (r"\b(?:take|knock)\w*\s+off\s+P", -1),
        (r"\b(?:reduc|decreas|lower|cut|discount|drop|fall|fell)\w*\s+(?:[\w#]+\s+){0,4}?by\s+P", -1),
        (r"P\s+more\b", 1),
        (r"\b(?:increas|rais|grow|grew|rise|rose)\w*\s+(?:[\w#]+\s+){0,4}?by\s+P", 1),
    )
)


def percent_changes(request: str) -> list[tuple[float, int]]:
    """Each percentage ``request`` takes off (-1) or adds on (+1) a number: "25% off" gives (25, -1)."""
    return [
        (value, direction) for value, (direction,) in _numbers_worded(request, _PERCENT_CHANGES, percent=True)
    ]


def as_percentage(expression: str, percent: float) -> bool:
    """Whether ``expression`` takes ``percent`` as a percentage: divides a part that holds it by 100 (``80 * 25 /
    100``, ``25 / 100 * 80``) or multiplies one by 0.01. Using 100 otherwise (``80 + 25 * 100``) is no such use."""
    for found in nodes(expression):
        op = found.op
        if isinstance(op.op, ast.Div) and found.right is not None and math.isclose(found.right, 100):
            if _holds(op.left, percent):
                return True
        elif isinstance(op.op, ast.Mult):  # a product of 0.01 and a part that holds it: 200 * 0.01 * 15
            parts = _chain(op, ast.Mult)
            hundredth = [k for k, part in enumerate(parts) if _is(worked_out(part), 0.01)]
            if hundredth and any(_holds(part, percent) for k, part in enumerate(parts) if k not in hundredth):
                return True
    return False


def _is(value: float | None, wanted: float) -> bool:
    return value is not None and math.isclose(value, wanted)


def _holds(node: ast.expr, value: float) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and math.isclose(n.value, value)
        for n in ast.walk(node)
    )


def changes_by(expression: str, percent: float, direction: int) -> bool:
    """Whether ``expression`` takes ``percent`` off (``80 * 0.75``, ``80 - 80 * 0.25``) or adds it on (``40 *
    1.1``, ``40 + 40 * 0.1``): a multiplication by what is left, or a subtraction (an addition)."""
    factor, combine = 1 + direction * percent / 100, ast.Sub if direction < 0 else ast.Add
    for found in nodes(expression):
        if isinstance(found.op.op, combine):
            return True
        if isinstance(found.op.op, ast.Mult) and any(
            side is not None and math.isclose(side, factor) for side in (found.left, found.right)
        ):
            return True
    return False


#: a scaling worded with its number ("twice 8", "double 21", "half of 58", "triple 7"): the factor
_SCALED: Final[tuple[tuple[re.Pattern[str], str, float], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), said, factor)
    for pattern, said, factor in (
        (r"\b(?:twice|double)\s+#(\d+)#", "twice", 2),
        (r"\b(?:half\s+of|halve)\s+#(\d+)#", "half of", 0.5),
        (r"\btriple\s+#(\d+)#", "triple", 3),
        (r"\b(?:a|one)\s+third\s+of\s+#(\d+)#", "a third of", 1 / 3),
        (r"\b(?:a|one)\s+quarter\s+of\s+#(\d+)#", "a quarter of", 0.25),
        (r"\b(?:a|one)\s+fifth\s+of\s+#(\d+)#", "a fifth of", 0.2),
        (r"\b(?:a|one)\s+tenth\s+of\s+#(\d+)#", "a tenth of", 0.1),
    )
)


def scaled(request: str) -> list[tuple[str, float, float]]:
    """Each number ``request`` scales by a word: "3 more than twice 8" gives ("twice", 8, 2)."""
    return [
        (said, value, factor) for value, (said, factor) in _numbers_worded(request, _SCALED, percent=False)
    ]


def scales(expression: str, number: float, factor: float) -> bool:
    """Whether ``expression`` scales ``number`` itself by ``factor`` (``8 * 2`` or ``8 + 8`` for twice 8, ``58 /
    2`` or ``58 * 0.5`` for half of 58), not something else it is part of (``(3 + 8) * 2``)."""

    def near(value: float | None, wanted: float) -> bool:
        return value is not None and math.isclose(value, wanted)

    for found in nodes(expression):
        left, right, operator = found.left, found.right, found.op.op
        if isinstance(operator, ast.Mult) and (
            (near(left, number) and near(right, factor)) or (near(right, number) and near(left, factor))
        ):
            return True
        if isinstance(operator, ast.Div) and near(left, number) and near(right, 1 / factor):
            return True
        if isinstance(operator, ast.Add) and factor == 2:
            parts = [worked_out(part) for part in _chain(found.op, ast.Add)]
            if sum(near(part, number) for part in parts) >= 2:
                return True
    return False
