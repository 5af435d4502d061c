"""Decomposition (spec 003's ``create_subplan``, driven by the multi-pass scheduler): a request made of sequenced
parts is planned one part at a time once a pass over the whole of it did not converge.

A small model plans one operation well and drops the later ones of a chain: "subtract 5 from 20, then divide
the result by 3" becomes "20 - 5". What one pass cannot do, the next can — plan the parts separately, each
knowing the result of the one before:

1. the request is split into parts (:func:`sequenced_parts`, deterministic, no model);
2. one pending *part step* per part is added at the end of the plan (ADD deltas the kernel applies, like any
   refinement: limits, stable ids, finished steps untouched). A part step is an ``llm`` step whose description
   is the part, with ids ``part1``, ``part2``, … (fresh variants when those are taken);
3. before a part step runs, the planner's ``create_subplan(part id, the part with its context, depth, max
   depth)`` writes its subplan, and the kernel REPLACEs the part step with it (ids ``part1.1``, ``part1.2``, …,
   nested one level under the part). The *context* is the previous part's result (:func:`part_context`),
   written into the part where it refers to it: "multiply the result by 4" → "multiply 5 by 4" (other
   contexts are added after it: "…, where the result is …"; :func:`with_context`). So the subplan of part 2 is
   asked for only once part 1's steps have run. (Of the wordings tried on Gemma 3 270M, "(the result so far:
   5)" made it copy a worked example's chain — ``(5 * 4) / 4``; the added "where the result is 81" was
   ignored often enough — ``19 + 19`` for "add 19 to it" — that the number now goes where the part refers to
   it; bench/README.md.)

A part whose subplan cannot be had (the model fails, the nesting limit) stays what it is, an ``llm`` step that
answers the part from the results so far. Decomposition is tried once per run.

**The split.** A request is cut where it sequences its parts:

* ``;``, and the connectives *then*, *after that*, *afterwards*, *finally* (alone or after a comma or *and*):
  "add 2 and 3, then multiply the result by 4" → "add 2 and 3" | "multiply the result by 4". *then* after an
  *if* in the same part is a condition, not a sequence, and is not cut;
* a comma followed by an operation on what came before — *plus*, *minus*, *times*, *multiplied by*,
  *divided by* — which stays in the part it starts: "what is 20 percent of 150, plus 7" → "what is 20 percent
  of 150" | "plus 7" ("7 plus 8, all times 4" → "7 plus 8" | "times 4");
* *and* or a comma followed by an operation verb (*add*, *subtract*, *multiply*, *divide*, *double*, *halve*,
  *square*, *take* ...), once the text before it names an operation on a number: "multiply 8 by 9 and subtract
  12 from the product" → "multiply 8 by 9" | "subtract 12 from the product". "take 50, add 25" is not cut
  there ("take 50" names no operation).

Parts are stripped of spaces and end punctuation; empty ones are dropped; a request with more than
:data:`MAX_PARTS` parts keeps the rest in its last part (the refinement limit is 10 per run: each part costs an
ADD and a REPLACE). A request of one part is not decomposed. Commas before a number ("the average of 3, 9 and
12") and *and* before anything but an operation verb never cut: they list operands rather than sequence
operations. The heuristic reads English connectives only. For any other request the planner is asked
(``RecursivePlanner.propose_parts``: the model proposes parts under a schema), and its parts are kept only when
:func:`proposed_parts` finds them to be the request's: that check reads numbers, in digits or words, not
connectives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from aeon_kernel import PlanStep, RecursivePlanner, RunContext, StepExecutionResult, StepStatus
from aeon_kernel.kit import Check, RecordAction, reviews
from aeon_plugins.calculator import request_numbers
from aeon_plugins.planning import compact, facts_in

MAX_PARTS: Final = 4
#: how much of a previous result goes into the next part's text when it is not a number
MAX_CONTEXT_CHARS: Final = 160

_CONNECTIVE: Final = r"(?:and\s+)?(?:then|after\s+that|afterwards|finally)\b\s*,?\s*"
#: cut here, and drop the marker
_SEQUENCE: Final = re.compile(rf"\s*;\s*(?:{_CONNECTIVE})?|(?:\s*,\s*|\s+){_CONNECTIVE}", re.IGNORECASE)
#: cut before the operation word, which stays in the new part
_CHAINED: Final = re.compile(
    r"\s*,\s*(?:all\s+)?(?=(?:plus|minus|times|multiplied\s+by|divided\s+by)\b)", re.IGNORECASE
)
#: cut before an operation verb after "and" or a comma, which stays in the new part, where the text before names
#: an operation on a number (:data:`_OPERATION`)
_OPERATION_VERBS: Final = (
    r"add|subtract|multiply|divide|double|halve|triple|square|cube|raise|reduce|increase|decrease|split"
)
_VERB: Final = re.compile(
    rf"(?:\s*,\s*(?:and\s+)?|\s+and\s+)(?=(?:{_OPERATION_VERBS}|take|knock)\b)", re.IGNORECASE
)
#: what names an operation (and so may be followed by another): an operation verb, or a word or symbol
_OPERATION: Final = re.compile(
    rf"\b(?:{_OPERATION_VERBS}|plus|minus|times|squared|cubed|percent|half|product|sum|difference|quotient"
    r"|average|root|power|together)|[-+*/^%]",
    re.IGNORECASE,
)
#: a condition's "if" ("if it is over 10 then halve it"), not the one of "what do you get if you ..."
_IF: Final = re.compile(r"(?<!\bget\s)(?<!\bhave\s)\bif\b", re.IGNORECASE)
#: a context that is numbers only (what :func:`part_context` gives after a tool)
_NUMBERS: Final = re.compile(r"[-+0-9.eE, ]+")
_TRIM: Final = " \t\n,.;:!?"
_ONE_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
#: words that refer to the previous part's result ("add 19 to it", "multiply what is left by 2")
_REFERENCE: Final = re.compile(
    r"\b(?:it|that|this|everything|what(?:'s|\s+is)\s+left|what\s+remains"
    r"|the\s+(?:result|answer|sum|product|difference|quotient|total|number|remainder))\b",
    re.IGNORECASE,
)
#: an operation a part starts with, on the result before it ("divided by 5", "all times 4")
_LEADING_OPERATION: Final = re.compile(
    r"(?:all\s+)?(?:plus|minus|times|multiplied\s+by|divided\s+by)\b", re.IGNORECASE
)
#: a part that names one operand of an operation and leaves out the result it works on (X: where it goes)
_MISSING_OPERAND: Final = tuple(
    (re.compile(pattern, re.IGNORECASE), written)
    for pattern, written in (
        (r"(subtract|take\s+away|take\s+off|deduct|remove)\s+(\S+)", r"\1 \2 from X"),
        (r"(add)\s+(\S+)", r"\1 \2 to X"),
        (r"(divide|multiply)\s+by\s+(\S+)", r"\1 X by \2"),
        (r"(halve|double|triple|square|cube)(\s+again)?", r"\1 X"),
    )
)
_NOT_GIVEN: Final = object()


def sequenced_parts(request: str) -> list[str]:
    """The parts ``request`` sequences, in order (see the module docstring); ``[request]`` when it has one."""
    parts = [request]
    for pattern, conditional in ((_SEQUENCE, True), (_CHAINED, False), (_VERB, False)):
        parts = [piece for part in parts for piece in _cut(part, pattern, conditional)]
    parts = [p.strip(_TRIM) for p in parts]
    parts = [p for p in parts if re.search(r"\w", p)]
    if len(parts) > MAX_PARTS:
        parts = [*parts[: MAX_PARTS - 1], ", ".join(parts[MAX_PARTS - 1 :])]
    return parts if len(parts) > 1 else [request]


def request_parts(request: str, planner: RecursivePlanner, record: RecordAction) -> list[str]:
    """The parts of ``request``: :func:`sequenced_parts`, or where it finds one, the ``planner``'s proposal as
    :func:`proposed_parts` keeps it."""
    parts = sequenced_parts(request)
    return parts if len(parts) > 1 else proposed_parts(request, planner.propose_parts(request, record=record))


def proposed_parts(request: str, parts: Sequence[str]) -> list[str]:
    """``parts`` a planner proposed for ``request``, kept when they are the request in parts: 2 to
    :data:`MAX_PARTS` of them, none the whole request, stating between them the request's numbers (read as the
    calculator reads them, in digits or words), each as often as the request does. A part may name an earlier
    result in words and take the numbers in another order ("take away 4 from the product of 9 and 3" → "multiply 9
    and 3" | "subtract 4 from the result"); it may not add or drop one. Otherwise ``[request]``."""
    kept = [p.strip(_TRIM) for p in parts if re.search(r"\w", p)]
    whole = request.strip(_TRIM).casefold()
    stated = sorted(value for _, value, _ in request_numbers(request))
    theirs = sorted(value for part in kept for _, value, _ in request_numbers(part))
    if (
        2 <= len(kept) <= MAX_PARTS
        and stated
        and theirs == stated
        and all(p.casefold() != whole for p in kept)
    ):
        return kept
    return [request]


def _cut(text: str, pattern: re.Pattern[str], conditional: bool) -> list[str]:
    pieces, start, conditions = [], 0, 0
    for match in pattern.finditer(text):
        before = text[start : match.start()]
        if conditional and "then" in match.group().lower() and len(_IF.findall(before)) > conditions:
            conditions += 1  # "if it rains then ...": a condition (each "if" takes one "then")
            continue
        if pattern is _VERB and not (_OPERATION.search(before) and request_numbers(before)):
            continue  # "take 50, add 25": nothing done yet to hand on
        pieces.append(before)
        start, conditions = match.end(), 0
    pieces.append(text[start:])
    return pieces


def fresh_id(base: str, taken: Iterable[str]) -> str:
    """``base``, or ``base`` with a letter after it, whichever no step has had (ids are never reused)."""
    used = set(taken)
    for suffix in ("", *"abcdefghijklmnopqrstuvwxyz"):
        if f"{base}{suffix}" not in used:
            return f"{base}{suffix}"
    n = 2
    while f"{base}_{n}" in used:
        n += 1
    return f"{base}_{n}"


def part_steps(parts: Sequence[str], taken: Iterable[str]) -> list[PlanStep]:
    """One pending ``llm`` step per part, with fresh ids, numbered and linked for the record."""
    used = set(taken)
    steps = []
    for k, part in enumerate(parts, start=1):
        step_id = fresh_id(f"part{k}", used)
        used.add(step_id)
        steps.append(
            PlanStep(
                step_id=step_id,
                description=part,
                agent="llm",
                incoming_context="the request" if k == 1 else f"the result of part {k - 1}",
                handoff_to_next=f"hands its result to part {k + 1}"
                if k < len(parts)
                else "its result is the answer",
            )
        )
    return steps


def part_context(steps: Sequence[PlanStep], previous_part: str | None) -> str | None:
    """What the previous part found, for the next part's text; None for the first part or when it found nothing.

    The previous part's steps are the part step itself or its subplan (ids under it). When one of them called a
    tool, the context is the numbers that tool's result holds beyond its arguments (``{"expression": "2 + 3",
    "value": 5}`` → ``5``; ``{"expression": "144 / 12", "value": 12}`` → ``12``, although 12 is an operand too):
    what a small model needs, without the operands it would reuse. Otherwise it is the last result, as compact
    text.
    """
    if previous_part is None:
        return None
    own = [
        s
        for s in steps
        if (s.step_id == previous_part or s.step_id.startswith(f"{previous_part}."))
        and s.status is StepStatus.COMPLETE
    ]
    if not own:
        return None
    tools = [s for s in own if s.tool is not None]
    if tools:
        last = tools[-1]
        arguments = last.arguments or {}
        if isinstance(last.result, Mapping):  # the entries that do not repeat an argument
            found = facts_in([{k: v for k, v in last.result.items() if arguments.get(k, _NOT_GIVEN) != v}])
        else:
            found = facts_in([last.result]) - facts_in([arguments])
        if found:
            return ", ".join(_number(v) for v in sorted(found))
        return compact(last.result, MAX_CONTEXT_CHARS)
    return compact(own[-1].result, MAX_CONTEXT_CHARS)


def with_context(part: str, context: str | None) -> str:
    """The text the planner decomposes: the part, and what the part before it found.

    A number found is written where the part refers to it ("add 19 to it" → "add 19 to 81"; "divided by 5" → "75
    divided by 5"; "subtract 15" → "subtract 15 from 30"), so the part reads as a request of its own, the kind a
    small model plans best; any other context is added after the part ("…, where the result is …")."""
    if not context:
        return part
    if _ONE_NUMBER.fullmatch(context):
        if _LEADING_OPERATION.match(part):
            return f"{context} {part}"
        for pattern, written in _MISSING_OPERAND:
            if pattern.fullmatch(part):
                return pattern.sub(written.replace("X", context), part)
        referred, count = _REFERENCE.subn(context, part, count=1)
        if count:
            return referred
    return f"{part}, where the result is {context}"


def settle_flagged_plan(run: RunContext) -> None:
    """The request's parts now replace a plan the planner's check left flagged (``inconclusive``): a ``resolved``
    check settles that doubt (:func:`aeon_kernel.verification.verify`), since each part is planned and checked on
    its own and, when the run ends, its calls are reviewed against the whole request. Doubts recorded later (a
    part's) stay."""
    if any(c.name == "plan_fits_request" and c.verdict == "inconclusive" for c in run.state.checks):
        detail = "the request's parts replace the plan it flagged; each is planned and checked on its own"
        check = Check(
            name="plan_fits_request", subject="plan", verdict="resolved", detail=detail, by="multi-pass"
        )
        run.record_check(check)


def reviewed(parts: Sequence[Mapping[str, Any]], run: RunContext, step_id: str | None, outcome: Any) -> Any:
    """A part's step as it ran, unless the part's calls do not do what the part asks. At the part's last tool step,
    each tool the part called reviews its calls against the part's text with the number it was given
    (:func:`with_context`). A finding makes the step's outcome a failure, so the step ends ``invalid`` and the
    next refinement may replace or modify it (issue 26: a step that was wrong although it ran). A part is one
    operation, so unlike a step of a whole plan it can be judged alone; a part given a text rather than a number
    is not judged (its numbers are not the part's). Any other step passes as it is."""
    part = next((p for p in parts if step_id and step_id.startswith(f"{p['step_id']}.")), None)
    if part is None or not isinstance(outcome, StepExecutionResult) or not outcome.success:
        return outcome
    calls, context = [c for c in outcome.tool_calls if c.error is None], part.get("context")
    own = [s for s in run.state.steps if s.step_id.startswith(f"{part['step_id']}.")]
    later = own[[s.step_id for s in own].index(step_id) + 1 :] if step_id in run.state.index else []
    if not calls or (context is not None and not _NUMBERS.fullmatch(context)) or any(s.tool for s in later):
        return outcome
    done = {s.step_id for s in own if s.status is StepStatus.COMPLETE}
    last = {c.step_id: c for c in run.state.tool_history if c.step_id in done and c.error is None}
    made = [*last.values(), *calls]  # each earlier step's call that counted, then this step's
    checks = reviews(with_context(part["text"], context), made, run.components.tools, whole_request=True)
    findings = [c.detail for c in checks if c.verdict == "failed" and c.detail]
    if not findings:
        return outcome
    why = f"its calls do not do what {part['step_id']} asks: {' '.join(findings)}"
    return outcome.model_copy(update={"success": False, "error": why})


def _number(value: float) -> str:
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)
