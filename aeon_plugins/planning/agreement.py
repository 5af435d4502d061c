"""Self-consistency as a check (issue 26; Wang et al., 2022): do plans written from other worked examples give the
same result?

A small model copies the worked example nearest the request. So the ``model`` planner, given ``[planner] samples
= N``, asks for N more plans for the same request, the k-th with the k-th nearest example left out of its prompt
(decoded as the plan is: greedy by default, so the samples are reproducible and a cassette replays them), and
calls their pure tools (:attr:`~aeon_kernel.tools.Tool.pure`, the calculator) itself, outside the run. When every
sample gives the plan's result, a ``plans_agree`` check passes; otherwise it is ``inconclusive`` and the result
cannot be ``verified``. Never ``failed``: on this project's model the majority of sampled plans is seldom right
(issue 26), so the samples test the plan, they do not vote on the answer. Only a plan whose every tool call is to
a pure tool, its arguments written in the plan, has a result before it runs; for any other no sample is asked for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aeon_kernel import Plan, Tool, ToolRegistry
from aeon_kernel.kit import Check, canonical_json


@dataclass(frozen=True)
class Outcome:
    """What a plan's tool calls give before the run: the last call's result without the fields that only echo
    its arguments (the calculator's ``expression``), or why there is none."""

    value: Any = None
    problem: str | None = None


def outcome(plan: Plan, tools: ToolRegistry) -> Outcome:
    """The result of ``plan``'s tool calls, made here when every one is to a pure tool that declares no
    permissions and has its arguments written in the plan."""
    calls = [step for step in plan.steps if step.tool is not None]
    if not calls:
        return Outcome(problem="it calls no tool")
    made: list[tuple[Tool, dict[str, Any]]] = []
    for step in calls:
        tool = tools.get(step.tool or "")
        if tool is None or not tool.pure or tool.permissions:
            return Outcome(problem=f"it calls {step.tool}, which is not a pure tool")
        if step.arguments is None:
            return Outcome(problem=f"step {step.step_id}'s arguments are written when it runs")
        made.append((tool, step.arguments))
    result: dict[str, Any] = {}
    for tool, arguments in made:
        try:
            tool.validate_input(**arguments)
            result = tool.invoke(**arguments)
            tool.validate_output(result)
        except Exception as exc:  # a call that fails gives no result; the run's own call is what counts
            return Outcome(problem=f"{tool.name} failed: {exc}")
    echoed = [canonical_json(v) for v in made[-1][1].values()]
    return Outcome(value={k: v for k, v in result.items() if canonical_json(v) not in echoed})


def agreement(plan: Outcome, samples: Sequence[Outcome]) -> Check:
    """The ``plans_agree`` check: passed when every sample gave ``plan``'s result, inconclusive otherwise."""
    differing = [s for s in samples if s.problem is not None or not same(s.value, plan.value)]
    shown = canonical_json(plan.value)
    if not differing:
        detail = f"{len(samples)} more plans, written from other worked examples, give {shown} too"
        return _check("passed", detail)
    others = "; ".join(
        f"no result ({s.problem})" if s.problem is not None else canonical_json(s.value) for s in differing
    )
    detail = (
        f"{len(differing)} of {len(samples)} plans written from other worked examples disagree with this one's "
        f"{shown}: {others}"
    )
    return _check("inconclusive", detail)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON values, numbers within rounding (``0.1 + 0.2`` is ``0.3``)."""
    if _number(a) and _number(b):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check(verdict: Any, detail: str) -> Check:
    return Check(name="plans_agree", subject="plan", verdict=verdict, detail=detail, by="model planner")
