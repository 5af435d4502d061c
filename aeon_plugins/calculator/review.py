"""The calculator's review of its calls against the request (:meth:`aeon_kernel.Tool.review`, issue 26).

A small model asked for "add 11 and 4, then multiply the result by 3" writes ``(11 + 4) / 3``, drops "and halve
the result", or squares 11 as ``11 * 22``. The calculator knows what arithmetic words mean, so it can say what a
call gets wrong without knowing the answer:

- **numbers**: every number the request states — in digits or in words ("twenty-six", "one hundred") — is used by
  some call; a call uses no number that the request, an earlier call's result or the request's words (double: 2,
  halve: 2, percent: 100, hours: 60 ...) do not account for.
- **operations**: each operation the request names ("times", "take away", "halve", "squared", "percent of",
  "average") appears in some call, and each step it names is done by an operation of its own: one
  multiplication does not "multiply 3 by 4 and double it".
- **operands** (in :mod:`aeon_plugins.calculator.operands`): an operation the request names with its operands
  ("the product of 11 and 3", "the difference between 100 and 37", "the average of 4, 8 and 12") combines
  exactly those numbers (``5 * 11 + 3`` does not).
- **which way round**: a subtraction, division or power the request words with its operands ("subtract 4 from
  10", "20 minus 7", "30 divided by 5", "3 go into 27", "2 to the power of 5") is not done the other way round
  (``4 - 10``), and one it applies to an earlier result ("then subtract 12", "divide what remains by 5", "split
  it into 6") takes that result, not a number the request states, as its left operand;
  "increase 50 by 20" adds them; "halve", "double", "triple" and "the square root" are done by dividing by 2 (or
  multiplying by 0.5), by 2, by 3 and by a power of 0.5, not by any multiplication or power.
- **order**: when the request sequences its operations ("then", "after that", "next", one sentence after
  another, ", squared"), the calls apply them in that order (``10 - 4 * 3`` does not "subtract 4 from 10, then
  multiply by 3").
- **as one calculation** (:mod:`aeon_plugins.calculator.chains`): every number the request states reaches the
  answer, only calls whose results reach it count, and a spoken chain ("100 minus 30 minus 20") is worked out as
  it is said.

The review approves only what it could check; anything else is a finding, said in words a planner can use. It
does not read what it cannot: a request with no arithmetic word and no number is no business of this tool's, and
calls to a request that names no operation ("12 eggs a box; how many eggs in 7 boxes?"), or calls that apply an
operation no word of the request accounts for, get no review (None), so the result is not verified.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from aeon_kernel.kit import Review, given_results, request_parts
from aeon_plugins.calculator.arithmetic import parse
from aeon_plugins.calculator.chains import chains, grouped_otherwise, reaching, unreached
from aeon_plugins.calculator.numbers import (
    NUMBER_WORDS,
    evaluated,
    is_in,
    request_numbers,
    shares,
    written,
)
from aeon_plugins.calculator.operands import (
    BRACKETED,
    SCALINGS,
    as_percentage,
    bindings,
    changes_by,
    combines,
    does,
    nodes,
    orders,
    percent_changes,
    powers,
    raises,
    scaled,
    scaled_by,
    scales,
    the_wrong_way_round,
    worked_out,
    works_out,
)

if TYPE_CHECKING:
    from aeon_plugins.calculator.operands import _Binding, _Order

# --- what the request's words ask ---------------------------------------------------------------------------------

#: a number written in words ("sixty-four over eight")
_A_NUMBER: Final = rf"(?:{'|'.join(sorted(NUMBER_WORDS, key=len, reverse=True))})"

#: what the request's words ask: a pattern, the operation's name, the operators that do it, and whether it is a
#: step of a sequence (a share such as "15%" or "a quarter of" modifies a number, it is not a step)
_WORD_CUES: Final[tuple[tuple[str, str, frozenset[str], bool], ...]] = (
    (r"\badd(?:s|ed|ing)?\b|\bplus\b|\bsum\b|\btotal\b|\bmore than\b", "add", frozenset("+"), True),
    (r"\bincrease[sd]?\b|\braise[sd]? by\b|\bris(?:e|es|en)\b|\brose\b|\bgr(?:ow|ows|ew|own)\b", "increase",
     frozenset("+*"), True),
    (r"\breduce[sd]?\b|\bdecrease[sd]?\b|\bdiscount(?:ed)?\b", "reduce", frozenset("-*"), True),
    (r"\bsubtract(?:s|ed|ing)?\b|\bminus\b|\btak(?:e|es|ing)(?:\s+[\w-]+){0,3}?\s+away\b|\bless\b|\bdifference\b"
     r"|\bspend(?:s|ing)?\b|\bspent\b|\bremov(?:e|es|ed)\b|\bg(?:ive|ives|ave)(?:\s+[\w-]+){0,2}?\s+away\b"
     r"|\bexceed(?:s|ed)?\b|\bfewer\b|\btaken\s+(?:away\s+)?from\b"
     r"|\bhow\s+much\s+(?:more|bigger|larger|greater|higher|taller|older|longer)\b"
     r"|\bknock(?:s|ed|ing)?\b(?:\s+[\w-]+){0,2}?\s+off\b"
     r"|\btak(?:e|es|ing)\s+(?!off\b)[\w-]+(?:\s+[\w-]+){0,2}?\s+(?:off|from)\b",
     "subtract", frozenset("-"), True),
    (r"\bmultipl(?:y|ied|ies)\b|(?<!how many )\btimes\b|\bproduct\b", "multiply", frozenset("*"), True),
    (r"\bdouble[sd]?\b|\btwice\b|\btriple[sd]?\b", "double or triple", frozenset("*+"), True),
    (r"\bdivide[sd]?\b|\bdivided\b|\bquotient\b|\b(?:go|goes|fit|fits)\s+into\b|\baverage\b|\bmean\b"
     r"|\bsplit\b|\bratio\b|\bshar(?:e|es|ed|ing)\b(?:\s+[\w-]+){0,3}?\s+(?:between|among)\b"
     rf"|(?:\d|\b{_A_NUMBER})\s+over\s+(?:\d|{_A_NUMBER}\b)|\bhow\s+many\s+\d+s?\s+(?:are\s+)?(?:there\s+)?in\b"
     r"|\bhow\s+many\s+times\s+(?:more|bigger|larger|greater)\b",
     "divide", frozenset("/"), True),
    (r"\bhalve[sd]?\b", "halve", frozenset("/*"), True),
    (r"\bsquared?\b|\bcubed?\b|\bpower\b", "raise to a power", frozenset("^"), True),
    (r"\bremainders?\b|\bmodulo\b|\bmod\b", "take the remainder", frozenset("%"), True),
    # "a third", "two fifths": a share; "the third power", "the fifth step": an ordinal, no share
    (r"%|\bper\s?cent\b|\bhalf\b|\bquarters?\b|\b(?:thirds|fifths|tenths)\b|\b(?:a|one)\s+(?:third|fifth|tenth)\b",
     "take a share", frozenset("*/%"), False),
)  # fmt: skip
#: operations written as symbols between numbers: "(3 + 4) * 5"
_SYMBOL_CUES: Final[tuple[tuple[str, str, frozenset[str], bool], ...]] = (
    (r"[\d)]\s*\+\s*[\d(]", "add", frozenset("+"), True),
    (r"[\d)]\s*-\s*[\d(]", "subtract", frozenset("-"), True),
    (r"[\d)]\s*[*\u00d7x]\s*[\d(]", "multiply", frozenset("*^"), True),
    (r"[\d)]\s*[/\u00f7]\s*[\d(]", "divide", frozenset("/"), True),
    (r"[\d)]\s*(?:\^|\*\*)\s*[\d(]", "raise to a power", frozenset("^"), True),
)  # fmt: skip
_CUES: Final = _WORD_CUES + _SYMBOL_CUES
#: numbers a request's words account for without stating them
_IMPLIED: Final[tuple[tuple[str, tuple[float, ...]], ...]] = (
    (r"\bdouble[sd]?\b|\btwice\b|\bhalve[sd]?\b|\bhalf\b|\bsquared?\b", (2, 0.5)),
    (r"\btriple[sd]?\b|\bcubed?\b", (3,)),
    (r"\bquarters?\b", (4, 0.25, 0.75)),  # "lose a quarter": 0.75 of it is left
    (r"\bthirds?\b", (3,)),
    (r"\bfourth\s+power\b", (4,)),
    (r"\bfifths?\b", (5, 0.2)),
    (r"\btenths?\b", (10, 0.1)),
    (r"\bsquare root\b", (0.5, 2)),
    (r"%|\bper\s?cent\b", (100, 0.01)),
    (r"\bhours?\b|\bminutes?\b|\bseconds?\b", (60, 3600)),
    (r"\bhours?\b", (24,)),  # "how many hours are in 2 weeks": 2 * 7 * 24
    (r"\bdays?\b", (24, 7)),
    (r"\bweeks?\b", (7, 52)),
    (r"\byears?\b", (12, 365, 52)),
    (r"\bdozens?\b", (12,)),
)
#: shares named in words: the denominator a calculation divides by, then the fractions it may multiply by
#: ("three quarters of 80": 80 * 3 / 4 or 80 * 0.75)
_SHARES: Final[tuple[tuple[re.Pattern[str], tuple[float, ...]], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), values)
    for pattern, values in (
        (r"\bquarters?\b", (4, 0.25, 0.75)),
        (r"\bthirds\b|\b(?:a|one)\s+third\b", (3, 1 / 3, 2 / 3)),
        (r"\bfifths\b|\b(?:a|one)\s+fifth\b", (5, 0.2, 0.4, 0.6, 0.8)),
        (r"\btenths\b|\b(?:a|one)\s+tenth\b", (10, 0.1)),
    )
)
#: words that account for an operation without naming a step of their own: "12 eggs each" (a product or a
#: share), "how many are left" (a subtraction), "the average" (a sum first)
_ALLOWS: Final[tuple[tuple[re.Pattern[str], frozenset[str]], ...]] = tuple(
    (re.compile(pattern, re.IGNORECASE), frozenset(operators))
    for pattern, operators in (
        (r"\b(?:each|per|every|apiece|a piece|hours?|minutes?|seconds?|days?|weeks?|months?|years?|dozens?)\b",
         "*/"),
        (r"\b(?:left|remain\w*|leftover|change|off|discount\w*|coupons?|vouchers?|rebates?|sale)\b", "-"),
        (r"\b(?:average|mean|altogether|in all|combined|together|earn\w*|gets?|got|more)\b", "+"),
        (r"\b(?:squared?|cubed?)\b", "*"),
    )
)  # fmt: skip
#: a question for a quantity: with two numbers and "each" or "per", a word problem ("how far did it go?")
_HOW_MUCH: Final = re.compile(r"\bhow\s+(?:many|much|far|long|old)\b|\bin\s+total\b|\baltogether\b", re.I)
#: words by which a follow-up in a conversation points at an earlier result ("double that", "add 4 to it")
_BACK: Final = re.compile(
    r"\b(?:that|it|this|the (?:result|answer|total|sum|product|difference|quotient|number|value|figure)"
    r"|(?:last|previous|earlier|first|second|other) (?:one|result|answer|number|value)|before|earlier|ago)\b",
    re.IGNORECASE,
)
#: words that sequence operations: the calls must apply them in the order the request states them
_SEQUENCE: Final = re.compile(
    r"\bthen\b|\bafter that\b|\bnext\b|\bfinally\b|\bafterwards\b|[.;]\s+\w"
    r"|,\s+(?:all\s+)?(?:squared|cubed|doubled|halved|tripled|times|divided|multiplied|minus|plus)\b",
    re.IGNORECASE,
)


#: an operation a request names: where, its name, the operators that do it, whether it is a step of a sequence
_Cue = tuple[int, str, frozenset[str], bool]


#: an operation done once more ("double 7, then double it again"), and a number combined with itself
_AGAIN: Final = re.compile(r"\bagain\b|\bonce\s+more\b", re.IGNORECASE)
_ITSELF: Final = re.compile(r"\bby\s+itself\b", re.IGNORECASE)
_DOUBLE: Final = re.compile(r"\bdouble[sd]?\b|\btwice\b", re.IGNORECASE)
_TRIPLE: Final = re.compile(r"\btriple[sd]?\b|\bthrice\b", re.IGNORECASE)
#: a percentage or a share, which a calculation may take of a number and then add to it or take off it again
_PERCENT_OR_SHARE: Final = re.compile(
    r"%|\bper\s?cent(?:age)?\b|\bhal(?:f|ve[sd]?)\b|\bquarters?\b|\bthirds?\b|\bfifths?\b|\btenths?\b",
    re.IGNORECASE,
)

#: "the total" (not "the total of ..."): a name for an earlier result, not an operation ("divide the total by 4")
_NAMED_RESULT: Final = re.compile(
    r"\bthe\s+(total|sum|product|difference|quotient)\b(?!\s+(?:of|between)\b)", re.IGNORECASE
)


def _operations(request: str) -> list[_Cue]:
    """The operations ``request`` names, in the order it names them."""
    found = []
    for pattern, name, operators, ordered in _CUES:
        found += [(m.start(), name, operators, ordered) for m in re.finditer(pattern, request, re.IGNORECASE)]
    names = {m.start(1) for m in _NAMED_RESULT.finditer(request)}
    # "the remainder when 17 is divided by 5": the division is the remainder's, not a step of its own
    if any(name == "take the remainder" for _, name, _, _ in found):
        names |= {start for start, name, _, _ in found if name == "divide"}
    return sorted((cue for cue in found if cue[0] not in names), key=lambda cue: cue[0])


def _implied(request: str, numbers: Sequence[tuple[int, float, bool]]) -> set[float]:
    return {1, *_implied_times(request, len(numbers))}


@lru_cache(maxsize=256)
def _implied_times(request: str, stated: int) -> dict[float, int]:
    """Each number the request's words imply, with how many times they imply it ("half ... halve": 2 twice)."""
    times: dict[float, int] = {}
    for pattern, values in _IMPLIED:
        found = len(re.findall(pattern, request, re.IGNORECASE))
        for value in values if found else ():
            times[value] = times.get(value, 0) + found
    if re.search(r"\baverage\b|\bmean\b", request, re.IGNORECASE):  # of n numbers: divided by n
        averaged = request_numbers(request)
        counts = [len(b.operands) for b in bindings(request, averaged) if b.name in ("average", "mean")]
        for count in counts or [stated]:
            times[float(count)] = times.get(float(count), 0) + 1
    return times


def _implied_too_often(
    request: str,
    stated: Sequence[tuple[int, float, bool]],
    numbers: Sequence[Sequence[float]],
    values: Sequence[float | None],
) -> list[str]:
    """A number the request's words imply, used more often than they imply it: ``64 / 2 + 10 * 2`` for "half of
    64, plus 10" (one "half", two 2s). A number the request states, or an earlier call's result, is no such use."""
    allowed = _implied_times(request, len(stated))
    given = [value for _, value, _ in stated]
    used = _uses(numbers, values, lambda n: bool(allowed.get(n)) and not is_in(n, given))
    return [
        f"The calculation uses {written(n)} {_said(times)}; the request's words imply it {_said(allowed[n])}."
        for n, times in used.items()
        if times > allowed[n]
    ]


def _stated_too_often(
    request: str,
    stated: Sequence[tuple[int, float, bool]],
    numbers: Sequence[Sequence[float]],
    values: Sequence[float | None],
) -> list[str]:
    """A number the request states, used more often than it states it (and its words imply it) by the calls that
    reach the answer: ``(7 + 5) * 3 + 3`` for "add seven and five, then multiply the result by three". A power's
    base ("6 squared": ``6 * 6``), a number doubled or tripled by addition ("double 21": ``21 + 21``), taken "by
    itself" or "again", and a number a request takes a percentage or a share of ("take 15% off 60": ``60 - 60 * 15
    / 100``; not the percentage: ``80 * 10 / 100 + 10`` for "10 percent of 80 added to 80") may come back; an
    earlier call's result is no such use."""
    stated_times = Counter(value for _, value, _ in stated)
    percentages = {value for _, value, percent in stated if percent}
    implied = _implied_times(request, len(stated))
    reused = _ITSELF.search(request) or _AGAIN.search(request) or _DOUBLE.search(request)
    shared = _PERCENT_OR_SHARE.search(request)
    tripled = _TRIPLE.search(request)

    def added(value: float) -> int:  # "double 21" may be 21 + 21, "triple 7" 7 + 7 + 7
        again = reused or (shared and value not in percentages)
        return 2 if tripled else 1 if again else 0

    allowed = {value: times + implied.get(value, 0) + added(value) for value, times in stated_times.items()}
    for base, exponent in powers(request):
        if base in allowed:
            allowed[base] += max(0, int(exponent) - 1)
    used = _uses(numbers, values, lambda n: n in allowed)
    return [
        f"The calculation uses {written(n)} {_said(times)}; the request states it {_said(stated_times[n])}."
        for n, times in used.items()
        if times > allowed[n]
    ]


def _uses(
    numbers: Sequence[Sequence[float]], values: Sequence[float | None], counted: Callable[[float], bool]
) -> dict[float, int]:
    """How often the calls use each number ``counted`` accepts, an earlier call's result left out."""
    used: dict[float, int] = {}
    for i, call in enumerate(numbers):
        results = [v for v in values[:i] if v is not None]
        for n in call:
            if counted(n) and not is_in(n, results):
                used[n] = used.get(n, 0) + 1
    return used


def _said(times: int) -> str:
    return {1: "once", 2: "twice"}.get(times, f"{times} times")


# --- what the calls do ---------------------------------------------------------------------------------------------

_OPERATORS: Final[dict[type[ast.operator], str]] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "/",
    ast.Mod: "%",
    ast.Pow: "^",
}


class _Op(NamedTuple):
    """An operation a call applies: its symbol (``+ - * / ^ %``; ``x*x`` or ``x^x`` for a number combined with
    itself) and, then, that number."""

    symbol: str
    number: float | None = None


@lru_cache(maxsize=512)
def _read(expression: str) -> tuple[tuple[float, ...], tuple[_Op, ...]] | None:
    """The numbers an expression uses and the operations it applies, in the order they are evaluated."""
    try:
        tree = parse(expression)
    except (SyntaxError, ValueError, RecursionError):
        return None
    numbers: list[float] = []
    operations: list[_Op] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.BinOp):
            walk(node.left)
            walk(node.right)
            symbol = _OPERATORS.get(type(node.op), "?")
            operand = node.left.value if isinstance(node.left, ast.Constant) else None
            # "12 ^ 12" for "the square of 12" (but "3 ^ 3": 3 cubed); "x * x" squares x, or multiplies it
            if symbol in "*^" and isinstance(operand, (int, float)) and _same(node.left, node.right):
                operations.append(_Op(f"x{symbol}x", float(operand)))
            else:
                operations.append(_Op("^" if symbol == "*" and _same(node.left, node.right) else symbol))
        elif isinstance(node, ast.UnaryOp):
            walk(node.operand)
        elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            numbers.append(float(node.value))

    walk(tree.body)
    return tuple(numbers), tuple(operations)


def _same(left: ast.expr, right: ast.expr) -> bool:
    """Both sides are the same number (``9 * 9``), or the same expression (``(2 + 3) * (2 + 3)``)."""
    if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
        return bool(left.value == right.value)
    return (
        type(left) is type(right) and not isinstance(left, ast.Constant) and ast.dump(left) == ast.dump(right)
    )


@lru_cache(maxsize=256)
def _read_request(
    request: str,
) -> tuple[tuple[tuple[int, float, bool], ...], tuple[_Cue, ...], frozenset[float], bool]:
    """What the request states and asks, read once per request (the planner and the kernel both review against
    it): its numbers, the operations it names, the numbers its words imply, and whether it names any in words."""
    stated = request_numbers(request)
    worded = any(re.search(pattern, request, re.IGNORECASE) for pattern, *_ in _WORD_CUES)
    return tuple(stated), tuple(_operations(request)), frozenset(_implied(request, stated)), worded


def review_calls(request: str, calls: Sequence[Mapping[str, Any]]) -> Review | None:
    """Whether the calculator ``calls`` (each with ``arguments`` and, once it ran, ``result``) do what ``request``
    asks, in order; each finding says what a call gets wrong. None when nothing is found but the calls apply an
    operation that the request does not name ("12 eggs a box, 7 boxes": 12 * 7 or 12 + 7): that cannot be checked,
    so it is not approved either."""
    given, request = request_parts(request)  # a session's earlier results may be used; only the rest is asked
    earlier = [
        r["value"] for r in given_results(given) if isinstance(r, Mapping) and _is_number(r.get("value"))
    ]
    stated, named, implied, worded = _read_request(request)
    available = (
        {value for _, value, _ in stated} | implied | {value for _, value, _ in request_numbers(given)}
    )
    for _, value, percent in stated:
        if percent:
            available.update(shares(value))
    used: list[float] = []
    # the calls the calculator can read: their expressions, numbers and operations, and values, in step
    expressions: list[str] = []
    read_calls: list[tuple[tuple[float, ...], list[str]]] = []
    values: list[float | None] = []
    findings: list[str] = []
    for call in calls:
        expression = (call.get("arguments") or {}).get("expression")
        if not isinstance(expression, str) or (read := _read(expression)) is None:
            findings.append(f"{expression!r} is not an expression the calculator can read.")
            continue
        numbers, operations = read
        strange = [n for n in numbers if not is_in(n, available)]
        if strange:
            listed = ", ".join(written(n) for n in dict.fromkeys(strange))
            findings.append(f"{expression!r} uses {listed}, which the request does not state.")
        if any(op.symbol == "x^x" and op.number not in implied for op in operations):
            findings.append(
                f"{expression!r} raises a number to the power of itself, which the request does not ask."
            )
        used += numbers
        expressions.append(expression)
        read_calls.append((numbers, [_applied(op, stated, values, request) for op in operations]))
        found = _value(call)
        values.append(found)
        if found is not None:  # a later call may use an earlier call's result (worked out if it has not run)
            available.add(found)
    if not calls:  # asked of a plan that calls no tool: is the request a calculation all the same?
        return _unanswered(request, named, stated, implied)
    # only what reaches the answer counts: "double 13 and then add 4" is not done by 13 * 2 and then 13 + 4
    answered_by = reaching([n for n, _ in read_calls], values)
    applied = [op for i in answered_by for op in read_calls[i][1]]
    if not named and len(stated) < 2 and implied == {1}:
        finding = (
            "The request asks for no calculation: it names no operation and states no numbers to combine."
        )
        return Review(approved=False, findings=(finding,), unrelated=True)
    if earlier and _follows_up(request, stated, named, implied):
        reached = {*used, *(v for c in calls for v in _partial_values(c))}
        if not any(is_in(float(value), reached) for value in earlier):
            listed = _listed([written(float(v)) for v in dict.fromkeys(earlier)])
            findings.append(f"The request builds on an earlier result ({listed}), which no calculation uses.")
        elif named and values and values[-1] is not None and is_in(values[-1], [float(v) for v in earlier]):
            findings.append(
                f"The calculation only works out the earlier result ({written(values[-1])}) again; the request "
                f"asks to {named[0][1]} it."
            )
    elif not earlier and (pointed := _BACK.search(request)) and _operands(stated, implied) < 2:
        findings.append(
            f"The request builds on an earlier result that it does not give ({pointed.group()!r}), so no "
            "calculation can be checked against it."
        )
    literals = _literal_expressions(request)
    for literal in literals if len(literals) == 1 and not worded else ():  # the request is one written sum
        wanted = evaluated(literal)
        if wanted is not None and not any(v is not None and is_in(wanted, [v]) for v in values):
            findings.append(
                f"The request writes {literal.strip()!r}, which is {written(wanted)}; no calculation gives that."
            )
    # "10 divided by (5 - 5)": the part in brackets as written, not (10 - 5) / 5
    for group in BRACKETED.findall(request):
        if not any(works_out(expression, group) for expression in expressions):
            findings.append(f"The request writes {group!r}; no calculation works that out.")
    for _, value, percent in stated:
        forms = shares(value) if percent else ()
        if not (is_in(value, used) or any(is_in(share, used) for share in forms)):
            findings.append(f"The request states {written(value)}, which no calculation uses.")
        # "by 15%" as "200 * 15", "by 25 percent" as "80 + 25 * 100"
        elif percent and not (
            any(is_in(n, used) for n in forms) or any(as_percentage(e, value) for e in expressions)
        ):
            findings.append(f"The request's {written(value)}% is never taken as a percentage.")
    for pattern, (denominator, *fractions) in _SHARES:
        takes = [scaled_by(fraction, denominator) for fraction in fractions]
        if (worded_share := pattern.search(request)) and not any(
            does(expression, taken) for expression in expressions for taken in takes
        ):
            findings.append(
                f"The request asks for {worded_share.group()!r} of something; no calculation takes that share."
            )
    given_numbers = [value for _, value, _ in stated]
    # a number that an earlier call gave is that call's result, even when the request states it too
    given_by_call = [
        [n for n in given_numbers if not is_in(n, [v for v in values[:i] if v is not None])]
        for i in range(len(expressions))
    ]
    ordered = orders(request)
    for order in ordered:
        ways = [the_wrong_way_round(e, order, given_by_call[i]) for i, e in enumerate(expressions)]
        if True in ways and False not in ways:
            findings.append(
                f"The request asks for {order.said}; the calculation does it the other way round "
                f"({order.reversed})."
            )
        # not 144 / (12 + 8); an addition or product no call applies at all is found below, as asked and not done
        elif (
            (order.left is not None or order.of_result)
            and False not in ways
            and (order.symbol not in "+*" or any(order.symbol in _counts(op) for op in applied))
        ):
            findings.append(f"The request asks for {order.said}; no calculation does that.")
    # an earlier question's words imply numbers too: a follow-up may work its result out again
    findings += _implied_too_often(
        f"{given}\n{request}", [*stated, *request_numbers(given)], [n for n, _ in read_calls], values
    )
    # the same calculation done again (a later pass, a part) uses its numbers once
    once = list({expressions[i]: i for i in answered_by}.values())
    findings += _stated_too_often(
        request, stated, [read_calls[i][0] for i in once], [values[i] for i in once]
    )
    findings += grouped_otherwise(expressions, values, request)
    if len(read_calls) > 1:
        findings += unreached(read_calls, answered_by, stated, expressions[-1])
    bound = bindings(request, stated)
    for binding in bound:
        if not any(combines(expression, binding) for expression in expressions):
            those = "exactly those" if binding.exact else "them"
            findings.append(f"The request asks {binding.said}; no calculation combines {those}.")
    for base, exponent in powers(request):
        if not any(raises(expression, base, exponent) for expression in expressions):
            power = "squared" if exponent == 2 else "cubed"
            findings.append(f"The request asks for {written(base)} {power}; no calculation does that.")
    changes = percent_changes(request)
    for share, direction in changes:
        if not any(changes_by(expression, share, direction) for expression in expressions):
            verb, side, how = (
                ("take", "off", "a subtraction") if direction < 0 else ("add", "on", "an addition")
            )
            findings.append(
                f"The request asks to {verb} {written(share)}% {side}; no calculation does ({how}, or a "
                f"multiplication by {written(1 + direction * share / 100)})."
            )
    for pattern, verb, scaling in SCALINGS:
        if pattern.search(request) and not any(does(expression, scaling) for expression in expressions):
            findings.append(f"The request asks to {verb}, which no calculation does.")
    allowed = _allowed(request)
    taken_away = "-" in allowed or any("-" in operators for *_, operators, _ in named)
    for word, number, factor in scaled(request):
        # "lose a quarter of 48; how many are left": 48 * 0.75 takes the quarter away
        factors = (factor, 1 - factor) if factor < 0.5 and taken_away else (factor,)
        if not any(scales(expression, number, f) for expression in expressions for f in factors):
            findings.append(f"The request asks for {word} {written(number)}; no calculation scales it so.")
    missing = [name for _, name, operators, _ in named if not any(operators & _counts(a) for a in applied)]
    for name in dict.fromkeys(missing):
        findings.append(f"The request asks to {name}, which no calculation does.")
    steps = [(name, operators) for _, name, operators, ordered in named if ordered]
    steps = steps if _AGAIN.search(request) else _collapsed(steps)  # "double 7, then double it again": twice
    done = _listed([_NAMES.get(op, op) for op in applied]) if applied else "nothing"
    if not missing and _SEQUENCE.search(request):
        if not _in_order([ops for _, ops in steps], applied):
            findings.append(
                "The request says in which order to calculate, and the calculation does it in another order: it "
                f"asks to {_listed([name for name, _ in steps])}; the calculation does {done}."
            )
    elif not missing and not _each_done([ops for _, ops in steps], applied):  # "... and double it": not 3 * 4
        findings.append(
            f"The request asks for {len(steps)} operations ({_listed([name for name, _ in steps], 'and')}); "
            f"the calculation does {done}."
        )
    # not checked, so not approved: an operation no word accounts for ("spent 12 and then 8" as 50 - 12 + 8); an
    # earlier question's words account for working its result out again
    accounted = allowed | {op for *_, operators, _ in (*named, *_operations(given)) for op in operators}
    if not findings and applied and not (named and all(_counts(op) & accounted for op in applied)):
        return None
    # nor is a subtraction, division or power whose operands no wording names (a percentage change: checked above)
    answering = [expressions[i] for i in answered_by]
    if not findings and not changes and _unordered(request, answering, ordered, bound):
        return None
    return Review(approved=not findings, findings=tuple(dict.fromkeys(findings)))


_ORDERED: Final[dict[type[ast.operator], str]] = {
    ast.Sub: "-", ast.Div: "/", ast.Mod: "/", ast.FloorDiv: "/", ast.Pow: "^",
}  # fmt: skip


def _unordered(
    request: str, expressions: Sequence[str], ordered: Sequence[_Order], bound: Sequence[_Binding]
) -> list[str]:
    """The subtractions, divisions and powers of ``expressions`` done in an order nothing in ``request`` names.

    Named: an order ("subtract 4 from 10", "then divide it by 5"), a named difference or quotient, a spoken chain,
    an expression the request writes, or a number its words imply on the right ("halve": / 2, "percent": / 100,
    "squared": ^ 2, "hours": / 60). A subtraction or division no wording orders ("she gave 8 of her 40 away") is
    taken the way round that does not make the result smaller than 0 (than 1 for a division); a power, never."""
    stated = request_numbers(request)
    # a number the words imply that the request states too ("60 km in 1.5 hours") is no evidence of order
    implied = [
        n for n in _implied_times(request, len(stated)) if n != 1 and not is_in(n, [v for _, v, _ in stated])
    ]
    right_sides: dict[str, list[float]] = {"-": [], "/": [*implied], "^": [*implied]}
    left_sides: dict[str, list[float]] = {"-": [], "/": [], "^": []}  # "subtract it from 100": 100 - anything
    for order in ordered:
        if order.symbol in right_sides and order.right is not None:
            right_sides[order.symbol].append(order.right)
        elif order.symbol in left_sides and order.left is not None:
            left_sides[order.symbol].append(order.left)
    for binding in bound:
        if binding.operator in (ast.Sub, ast.Div):
            right_sides["-" if binding.operator is ast.Sub else "/"] += binding.operands
    for said in [chain.said for chain in chains(request)] + list(_literal_expressions(request)):
        for symbol in right_sides:
            right_sides[symbol] += [value for _, value, _ in request_numbers(said)] if symbol in said else []
    unordered = []
    for expression in expressions:
        for found in nodes(expression):
            symbol, left, right = _ORDERED.get(type(found.op.op), ""), found.left, found.right
            if not symbol or left is None or right is None:
                continue
            if is_in(right, right_sides[symbol]) or is_in(left, left_sides[symbol]):
                continue
            if symbol == "^" or left < right:
                unordered.append(f"{written(left)} {symbol} {written(right)}")
    return unordered


_NAMES: Final = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "divide",
    "^": "raise to a power",
    "%": "modulo",
    "x*x": "multiply",
}


#: an expression written out in the request: numbers, operators and brackets, at least one operator
_LITERAL: Final = re.compile(r"[-(]*\d[\d.,\s]*(?:\s*[-+*/^\u00d7\u00f7()]+[\s(]*\d[\d.,\s]*\)*)+")


def _allowed(request: str) -> set[str]:
    return {op for pattern, operators in _ALLOWS if pattern.search(request) for op in operators}


@lru_cache(maxsize=512)
def _literal_expressions(request: str) -> tuple[str, ...]:
    found = (m.group() for m in _LITERAL.finditer(request))
    return tuple(text for text in found if re.search(r"\d\s*[-+*/^\u00d7\u00f7]", text))


def _value(call: Mapping[str, Any]) -> float | None:
    """What a call computes: its result's value once it ran, else its expression evaluated (arithmetic is pure)."""
    result = call.get("result")
    if isinstance(result, Mapping) and isinstance(result.get("value"), (int, float)):
        return float(result["value"])
    expression = (call.get("arguments") or {}).get("expression")
    return evaluated(expression) if isinstance(expression, str) else None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _unanswered(
    request: str, named: Sequence[_Cue], stated: Sequence[tuple[int, float, bool]], implied: frozenset[float]
) -> Review:
    """The review of no call: a finding when the request is a calculation ("add 17 and 26", "60 km per hour for
    3 hours, then 40 km more"), else unrelated (it asks nothing of the calculator)."""
    worded = bool(named) and _operands(stated, implied) >= 2
    if worded or (len(stated) >= 2 and _allowed(request) - {"+"} and _HOW_MUCH.search(request)):
        what = f"to {_listed([name for _, name, _, _ in named], 'and')}" if named else "a calculation"
        finding = f"The request asks {what} with its numbers; no step calls the calculator to do it."
        return Review(approved=False, findings=(finding,))
    finding = "The request asks for no calculation: it names no operation on numbers it states."
    return Review(approved=False, findings=(finding,), unrelated=True)


def _follows_up(
    request: str, stated: Sequence[Any], named: Sequence[_Cue], implied: frozenset[float]
) -> bool:
    """Whether ``request`` continues from an earlier result: it points at one ("that", "the last answer"), or it
    names an operation with too few numbers to do it alone ("add 4", "times two")."""
    if _BACK.search(request):
        return True
    return bool(named) and _operands(stated, implied) < 2


def _operands(stated: Sequence[Any], implied: frozenset[float]) -> int:
    """How many operands a request gives: its numbers, and one more when its words imply one ("halve": 2)."""
    return len(stated) + (1 if implied - {1} else 0)


def _partial_values(call: Mapping[str, Any]) -> list[float]:
    """The value of every part of a call's expression: ``(2 + 3) * 2`` works out 5 on its way to 10."""
    expression = str((call.get("arguments") or {}).get("expression"))
    return [value for found in nodes(expression) if (value := worked_out(found.op)) is not None]


def _collapsed(steps: Sequence[tuple[str, frozenset[str]]]) -> list[tuple[str, frozenset[str]]]:
    """Steps named twice in a row are one ("add up 12 and 18, then divide the total": "total" names the sum)."""
    kept: list[tuple[str, frozenset[str]]] = []
    for step in steps:
        if not kept or kept[-1] != step:
            kept.append(step)
    return kept


def _in_order(wanted: Sequence[frozenset[str]], applied: Sequence[str]) -> bool:
    """``wanted`` (the request's steps, in its order) is a subsequence of ``applied`` (the order the calls
    evaluate their operations)."""
    position = 0
    for operation in applied:
        if position < len(wanted) and wanted[position] & _counts(operation):
            position += 1
    return position == len(wanted)


def _each_done(wanted: Sequence[frozenset[str]], applied: Sequence[str]) -> bool:
    """Each of ``wanted`` (the request's steps, in any order) is done by an operation of ``applied`` of its own: a
    matching, found by augmenting paths (a request names a handful of steps)."""
    owner: dict[int, int] = {}  # applied operation -> the wanted step it does

    def place(step: int, seen: set[int]) -> bool:
        for i, operation in enumerate(applied):
            if i not in seen and wanted[step] & _counts(operation):
                seen.add(i)
                if i not in owner or place(owner[i], seen):
                    owner[i] = step
                    return True
        return False

    return all(place(step, set()) for step in range(len(wanted)))


def _applied(
    op: _Op, stated: Sequence[tuple[int, float, bool]], results: Sequence[float | None], request: str
) -> str:
    """What an operation counts as: ``x ^ x`` raises to a power; ``9 * 9`` multiplies when the request states 9
    twice ("9 times 9"), multiplies it "by itself", or an earlier call gave it, else it squares ("21 * 21" is no
    double)."""
    if op.symbol == "x^x":
        return "^"
    if op.symbol == "x*x":
        number = op.number or 0.0
        twice = sum(math.isclose(v, number) for _, v, _ in stated) >= 2 or _ITSELF.search(request)
        return "x*x" if twice or is_in(number, [r for r in results if r is not None]) else "^"
    return op.symbol


def _counts(operation: str) -> frozenset[str]:
    """What an applied operation counts as: ``x * x`` both multiplies and squares."""
    return frozenset("*^") if operation == "x*x" else frozenset((operation,))


def _listed(items: Sequence[str], last: str = "then") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])}, {last} {items[-1]}"
