"""Grounded answers: a model's answer may not state a number that neither the request nor a tool supports.

A small model that has just been told ``{"value": 42}`` by the calculator will still, now and then, answer "6
times 7 is 48". Nothing downstream can tell, so the kernel checks: every number the answer states must be one
of the numbers in the request, in a tool call's arguments or in a tool's result (allowing for the rounding the
answer's own precision implies, and thousands separators), and a calculation it states with its value must come
to that value (:func:`false_claim`). An answer that fails the check contradicts its tools.

The number check runs once a tool step has ended (without one there is nothing to contradict), and it reads
numbers only: a claim in words is beyond a deterministic check. An answer that is the prompt's worked example,
copied for another request, is refused whether a tool ran or not.

The same reading checks a plan before it runs (:func:`plan_problems`): a plan that never uses a number the request
states ("10 - 4" for "(10 - 4) * 3"), or that gives a tool a worked example's text instead of the request's, was
not written for this request; the model planner then asks for it once more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

from aeon_kernel import PlanStep, StepStatus
from aeon_kernel.kit import StepContext, request_parts
from aeon_plugins.calculator import as_symbols, evaluated, request_numbers
from aeon_plugins.planning.examples import example_arguments
from aeon_plugins.planning.prompts import EXAMPLE_ANSWER, EXAMPLE_REQUEST, compact

#: A number as an answer writes it: thousands separators, decimals, exponent (the sign is not compared). Not a
#: digit run that is part of a word or an identifier ("3-day" counts; "mp3" and "step_2" do not).
_NUMBER: Final = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)")
#: what makes a number a percentage: a plan may use "15%" as 15 or as 0.15
_PERCENT: Final = re.compile(r"\s*(?:%|per\s?cent\b)", re.IGNORECASE)
_TOKEN: Final = re.compile(r"[^\W_]+")


def numbers_in(text: str) -> list[tuple[str, float]]:
    """Each number ``text`` states, as written and as a value."""
    return [(written, value) for written, value, _ in _numbers_at(text)]


def _numbers_at(text: str) -> list[tuple[str, float, int]]:
    found = []
    for match in _NUMBER.finditer(text):
        written = match.group()
        try:
            value = float(written.replace(",", ""))
        except ValueError:  # pragma: no cover - the pattern only matches what float() reads
            continue
        if math.isfinite(value):
            found.append((written, value, match.start()))
    return found


def facts_in(values: Iterable[Any]) -> set[float]:
    """Every number in ``values``: JSON numbers at any depth, and numbers written inside strings."""
    facts: set[float] = set()
    for item in _leaves(values):
        if isinstance(item, bool):
            continue
        if (isinstance(item, int) and abs(item) < 10**308) or (
            isinstance(item, float) and math.isfinite(item)
        ):
            facts.add(float(item))  # (a larger integer, which a tool may return, has no float)
        elif isinstance(item, str):
            facts.update(value for _, value in numbers_in(item))
    return facts


def unsupported_numbers(answer: str, facts: set[float]) -> list[str]:
    """The numbers ``answer`` states that match no fact, as written (empty: the answer is grounded)."""
    return [written for written, value in signed_numbers(answer) if not _supported(written, value, facts)]


def signed_numbers(text: str) -> list[tuple[str, float]]:
    """:func:`numbers_in`, with a minus sign written on a number read as its sign ("30 - 90 is -60": 30, 90, -60);
    a minus between two numbers ("30 - 90", "30 -90") is a subtraction."""
    found = []
    for written, value, start in _numbers_at(text):
        before = text[:start]
        if before.endswith("-") and not re.search(r"[\d.)\]]\s*-$|[^\s(=:\[]-$", before):
            written, value = f"-{written}", -value
        found.append((written, value))
    return found


def _supported(written: str, value: float, facts: set[float]) -> bool:
    """``value`` is a fact, or a fact rounded to the precision ``written`` shows (12.5 → "13" or "12", 1/3 →
    "0.33"), sign aside ("the difference is 3" for -3) unless a sign is written ("-60" is not 60)."""
    if "e" in written.lower():
        tolerance = abs(value) * 1e-3  # 6.02e23: three significant figures at least
    else:
        decimals = len(written.split(".")[1]) if "." in written else 0
        tolerance = 0.5 * 10.0**-decimals + 1e-9
    if written.startswith("-"):
        return any(abs(value - fact) <= tolerance for fact in facts)
    return any(abs(abs(value) - abs(fact)) <= tolerance for fact in facts)


def _leaves(values: Iterable[Any], limit: int = 10_000) -> Iterator[Any]:
    """Scalars inside ``values``, at most ``limit`` of them (a huge result is not walked whole)."""
    stack = list(values)
    seen = 0
    while stack and seen < limit:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            seen += 1
            yield item


def grounding_problem(answer: str, request: str, steps: Sequence[PlanStep], *, final: bool) -> str | None:
    """What makes ``answer`` contradict the tools, or None when nothing does.

    An answer may not be the prompt's worked example copied for another request, nor the request said again
    (before any tool step has ended: after, the rules below find it). Once a tool step has ended,
    every number the answer states must be one of the request's, of a finished tool step's arguments or of a
    completed one's result. The ``final`` answer (the plan's last step) must also report what the last tool
    found, when it completed: one of the numbers its result holds beyond its arguments, if it holds any (a
    report that only restates the request is no answer).
    """
    if answer.strip() == EXAMPLE_ANSWER and request.strip() != EXAMPLE_REQUEST:
        return "It copies the example's answer, which is about another request."
    finished = _tool_steps(steps)
    if not finished:  # no tool to hold it to; but a reply that only says the request again answers nothing
        echoed = _TOKEN.findall(answer.lower()) == _TOKEN.findall(request.lower())
        return "It repeats the request instead of answering it." if echoed else None
    done = [s for s in finished if s.status is StepStatus.COMPLETE]
    facts = facts_in([request, *(s.arguments for s in finished), *(s.result for s in done)])
    unsupported = unsupported_numbers(answer, facts)
    if unsupported:
        return f"It states {', '.join(unsupported)}, which no result above says."
    if (false := false_claim(answer, facts)) is not None:
        return false
    last = finished[-1]
    found = (
        facts_in([last.result]) - facts_in([last.arguments]) if last.status is StepStatus.COMPLETE else set()
    )
    if final and found and not any(_supported(w, v, found) for w, v in numbers_in(answer)):
        return "It does not state the result the tools gave."
    return None


#: a calculation followed by what it is said to come to: "96 / 8 is 132", "6 * 7 = 42"
_CLAIM: Final = re.compile(
    r"(?<![\w.])([\d.(][\d\s.()+\-*/^]*?\d\s*\)?)\s*(?:=|\bis\b|\bequals\b)\s*(-?[\d.(][\d\s.()+\-*/^]*)"
)
_OPERATOR: Final = re.compile(r"[\d)]\s*[-+*/^]\s*[\d(]")


def false_claim(answer: str, facts: set[float]) -> str | None:
    """What is false in a calculation ``answer`` states with its value ("96 divided by 8 is 132": 96 / 8 is 12),
    or in one that comes to a value no fact is ("8 divided by 12 is 8 / 12" for 96 / 12): each number may be
    grounded while the sentence is not. None when every stated calculation holds (or none is stated)."""
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", answer)  # 1,200 is 1200
    text = as_symbols(text.replace("\u00d7", "*").replace("\u00f7", "/"))  # "6 times 7" is 6 * 7
    for said, value_said in _CLAIM.findall(text):
        said, value_said = said.strip(), value_said.strip().rstrip(".").strip()
        if not _OPERATOR.search(said) or (worked := evaluated(said)) is None:
            continue
        claimed = evaluated(value_said)
        if claimed is None:
            continue
        if not _OPERATOR.search(value_said):  # the number itself is grounded (unsupported_numbers)
            if not _supported(value_said, worked, {claimed}):
                return f"It says {said} is {value_said}, but {said} is {worked:.15g}."
        elif not any(math.isclose(worked, fact, rel_tol=1e-9, abs_tol=1e-9) for fact in facts):
            return f"It says {said} is {value_said}, which no result above comes to."
    return None


def grounded_numbers(request: str, steps: Sequence[PlanStep]) -> tuple[set[float], set[float]] | None:
    """What :func:`grounding_problem` lets an answer state once a tool step has ended — every number of the request,
    of the finished tool steps' arguments and of the completed ones' results — and, of those, what the last tool
    found beyond its arguments (a final answer must state one); None before any tool step has ended."""
    finished = _tool_steps(steps)
    if not finished:
        return None
    done = [s for s in finished if s.status is StepStatus.COMPLETE]
    facts = facts_in([request, *(s.arguments for s in finished), *(s.result for s in done)])
    last = finished[-1]
    found = (
        facts_in([last.result]) - facts_in([last.arguments]) if last.status is StepStatus.COMPLETE else set()
    )
    return facts, found


def judged_problem(
    ctx: StepContext, answer: str, request: str, steps: Sequence[PlanStep], *, final: bool
) -> str | None:
    """The planner's judgement of a model answer to one of its steps (``Planner.answer_problem``); a context
    without a planner: the grounding check itself."""
    if ctx.planner is None:
        return grounding_problem(answer, request, steps, final=final)
    return ctx.planner.answer_problem(answer, request, steps, final=final)


def plan_problems(steps: Sequence[PlanStep], request: str) -> list[str]:
    """What shows that a plan was not written for ``request``, each as a sentence (empty: nothing does).

    Each number the request states in digits must be used: in a tool step's arguments, or in the description of
    a step that thinks (which may use it in words: "write a 3-line poem"); a percentage may be used as a share
    (0.15 for 15%). The tools' arguments may not use one of them more often than the request states it ("12 ^
    12" for "the square of 12", "200 * 15 / 200" for "15% of 200"). And no tool may be given a worked example's
    text that the request does not say ("the sky is blue" for "repeat back exactly: Aeon is small"). The goal
    and a tool step's description do not count: a model restates the request there, then leaves a number out
    of the call. Numbers in words are not read, except to tell the request's text from an example's.
    """
    request = request_parts(request)[1]  # what a caller gave as context need not be used
    stated = _request_numbers(request)
    in_calls = [value for step in steps if step.tool is not None for value in _numbers(step.arguments)]
    used = {
        *in_calls,
        *(value for step in steps if step.tool is None for value in _numbers(step.description)),
    }
    values = [value for _, value, _ in stated]
    # a tool step whose arguments the model writes when it runs may use any number yet (reviewed once it ran)
    later = any(step.tool is not None and step.arguments is None for step in steps)
    missing = [] if later else unused_numbers(request, used)
    repeated = _unique(
        written for written, value, _ in stated if sum(v == value for v in in_calls) > values.count(value)
    )
    problems = []
    if missing:
        problems.append(f"The plan does not use {_listed(missing)} from the request.")
    if repeated:
        problems.append(f"The plan uses {_listed(repeated)} more often than the request states it.")
    examples = {text.casefold() for text in example_arguments()}
    # "the product of six and seven" says 6 and 7: a call "6 * 7" is the request's, not the example's
    in_digits = " ".join(f"{value:g}" for _, value, _ in request_numbers(request))
    said = set(_TOKEN.findall(f"{request} {in_digits}".casefold()))
    for value in _leaves([step.arguments for step in steps if step.tool is not None]):
        if (
            isinstance(value, str)
            and value.strip().casefold() in examples
            and not set(_TOKEN.findall(value.casefold())) <= said
        ):
            problems.append(f"{value.strip()!r} is a worked example's text, not the request's.")
    return _unique(problems)


def unused_numbers(request: str, used: Iterable[float]) -> list[str]:
    """The numbers ``request`` states in digits of which ``used`` holds none, as written, each once.

    A percentage may be used as its share (0.15 for "15%"), decided where it is written: in "20% of 20" the
    second 20 must be used as 20. Numbers in words are not read. The plan check (:func:`plan_problems`) and the
    semantic validator's check of a run's tool calls both ask this.
    """
    values = list(used)
    return _unique(
        written
        for written, _, shares in _request_numbers(request_parts(request)[1])
        if not any(_is_in(v, values) for v in shares)
    )


def _request_numbers(request: str) -> list[tuple[str, float, tuple[float, ...]]]:
    """Each number ``request`` states: as written, its value, and the values a plan may use it as."""
    found: list[tuple[str, float, tuple[float, ...]]] = []
    for match in _NUMBER.finditer(request):
        written = match.group()
        value = float(written.replace(",", ""))
        if math.isfinite(value):
            percent = _PERCENT.match(request, match.end()) is not None
            found.append((written, value, (value, value / 100) if percent else (value,)))
    return found


def _numbers(value: Any) -> list[float]:
    """Every number in ``value``, each time it occurs: JSON numbers and numbers written inside strings."""
    found: list[float] = []
    for item in _leaves([value]):
        if isinstance(item, str):
            found += [number for _, number in numbers_in(item)]
        elif (isinstance(item, int) and not isinstance(item, bool) and abs(item) < 10**308) or (
            isinstance(item, float) and math.isfinite(item)
        ):
            found.append(float(item))
    return found


def _is_in(value: float, values: Iterable[float]) -> bool:
    return any(math.isclose(value, other, rel_tol=1e-9) for other in values)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def tool_answer(steps: Sequence[PlanStep]) -> str | None:
    """The answer the tools themselves give, as a sentence — what the last finished tool step found ("20 * 80 /
    100 is 16."), or why it failed — or None when no tool step has ended."""
    finished = _tool_steps(steps)
    if not finished:
        return None
    last = finished[-1]
    if last.status is StepStatus.FAILED:
        return f"The {last.tool} could not do it: {str(last.failure).rstrip('.')}."
    result, given = last.result, last.arguments or {}
    if not isinstance(result, dict):
        return f"The {last.tool} gives {compact(result)}."
    found = {k: v for k, v in result.items() if given.get(k) != v and not isinstance(v, (dict, list))}
    asked = [v for v in given.values() if isinstance(v, str)]
    if len(found) == 1 and len(asked) == 1:  # {"expression": "20 * 80 / 100"} → {"value": 16}
        return f"{asked[0]} is {_said(next(iter(found.values())))}."
    if found:
        return f"The {last.tool} gives " + ", ".join(f"{k} {_said(v)}" for k, v in found.items()) + "."
    if len(result) == 1 and isinstance(text := next(iter(result.values())), str):
        return text  # the echo: the result is the text itself
    return f"The {last.tool} gives {compact(result)}."


def _said(value: Any) -> str:
    return value if isinstance(value, str) else compact(value)


def _tool_steps(steps: Sequence[PlanStep]) -> list[PlanStep]:
    return [s for s in steps if s.tool is not None and s.status in (StepStatus.COMPLETE, StepStatus.FAILED)]
