"""The numbers a request states, in digits or in words ("twenty-six", "one hundred and five", "4s"), and the
value of an expression the calculator can work out."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Final

from aeon_plugins.calculator.arithmetic import evaluate

UNITS: Final = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
TENS: Final = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
}  # fmt: skip
SCALES: Final = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
#: the words a number is written with
NUMBER_WORDS: Final = frozenset(UNITS) | frozenset(TENS) | frozenset(SCALES)
_WORD: Final = re.compile(r"[a-z]+")
#: "4s": fours; "the 8th power": 8 (an ordinal elsewhere, "the 5th of May", is no operand)
_DIGITS: Final = re.compile(
    r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?=s\b|(?:st|nd|rd|th)\s+power\b|(?!\w))"
)
_PERCENT_AFTER: Final = re.compile(r"\s*(?:%|per\s?cent\b)", re.IGNORECASE)


def request_numbers(request: str) -> list[tuple[int, float, bool]]:
    """Each number ``request`` states, in digits or in words: its position, value, and whether it is a percentage."""
    return [(start, value, percent) for start, _, value, percent in number_spans(request)]


@lru_cache(maxsize=256)
def number_spans(request: str) -> tuple[tuple[int, int, float, bool], ...]:
    """Each number ``request`` states: where it starts and ends, its value, and whether it is a percentage."""
    found = []
    for match in _DIGITS.finditer(request):
        value = float(match.group().replace(",", ""))
        found.append(
            (match.start(), match.end(), value, _PERCENT_AFTER.match(request, match.end()) is not None)
        )
    text = request.lower()
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
    i = 0
    while i < len(words):
        start, end, word = words[i]
        if word not in UNITS and word not in TENS:
            i += 1
            continue
        total, current = 0.0, 0.0
        while i < len(words):
            _, end_here, word = words[i]
            gap = text[end : words[i][0]] if words[i][0] > end else ""
            if current and gap.strip("- ") and gap.strip() not in ("and",):
                break
            if word in UNITS:
                current += UNITS[word]
            elif word in TENS:
                current += TENS[word]
            elif word in SCALES and current:
                current *= SCALES[word]
                if SCALES[word] >= 1000:
                    total, current = total + current, 0.0
            elif word == "and" and current and words[i - 1][2] in SCALES:
                pass  # "one hundred and five"; "six and nine" are two numbers
            else:
                break
            end = end_here
            i += 1
        value = total + current
        if value == 1 and _is_pronoun_one(text, start):
            continue
        # "one hundred and" ending the number: the "and" joins what follows
        if text[start:end].endswith(" and"):
            end -= len(" and")
        found.append((start, end, value, _PERCENT_AFTER.match(text, end) is not None))
    return tuple(sorted(found))


def _is_pronoun_one(text: str, start: int) -> bool:
    """ "one" as in "which one", "each one" or "one of them" is not a number a calculation uses."""
    after = re.match(r"one\s+(?:of|more|another|by one|half|third|quarter|fifth|tenth)\b", text[start:])
    return (
        after is not None
        or re.search(r"\b(?:each|every|which|that|this|the|any|no)\s+$", text[:start]) is not None
    )


@lru_cache(maxsize=512)
def evaluated(expression: str) -> float | None:
    try:
        return float(evaluate(expression.replace(",", "")))
    except Exception:
        return None


def written(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def shares(percent: float) -> tuple[float, float, float]:
    """What a calculation may use a percentage as: 15% of x as 0.15 * x, increased or reduced by it as 1.15 * x or
    0.85 * x."""
    return percent / 100, 1 + percent / 100, 1 - percent / 100


def is_in(value: float, values: Iterable[float]) -> bool:
    """Whether ``value`` is one of ``values``, as a calculation may give it (``0.1 + 0.2`` is 0.3)."""
    return any(math.isclose(value, other, rel_tol=1e-9, abs_tol=1e-12) for other in values)
