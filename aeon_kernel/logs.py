"""Reading a JSONL log back, every FR-038 field whole (decision 0012).

A cycle's line carries the plan at cycle start (FR-038). Written whole on every line, a plan of N steps makes
the log grow as N x cycles — quadratic for a run that steps through its plan — so the ``jsonl`` sink writes the
whole plan (``plan_state``) on a run's first line with a plan and whenever its shape changes (another goal, other
steps), and otherwise only the steps that changed since the line before (``plan_changes``). :func:`read_log`
puts ``plan_state`` back on every line, so a reader sees what a line with the whole plan would have said.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Iterator
from itertools import compress
from pathlib import Path
from typing import Any, Final

from aeon_kernel.models import Plan, PlanStep

#: the key of a line that carries only the steps that changed since the run's previous line
PLAN_CHANGES: Final = "plan_changes"


def changed_steps(plan: Plan, previous: Plan) -> list[PlanStep] | None:
    """The steps of ``plan`` that differ from ``previous``'s, or None when the plan's shape changed (another goal,
    other steps): what a log line carries instead of the whole plan.

    A run's plans share every step object a cycle did not touch, so the steps to look at are found by identity,
    in C (``map``/``compress``), and only those are compared by value: a 1,000-step plan costs microseconds.
    """
    steps, before = plan.steps, previous.steps
    if plan.goal != previous.goal or len(steps) != len(before):
        return None
    touched = list(compress(range(len(steps)), map(operator.is_not, steps, before)))
    if any(steps[i].step_id != before[i].step_id for i in touched):
        return None
    return [steps[i] for i in touched if steps[i] != before[i]]


def expand_log(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``records`` (decoded lines, in file order) with ``plan_state`` rebuilt where a line carries changes."""
    plans: dict[str, dict[str, Any]] = {}
    for record in records:
        run_id = record.get("run_id")
        if PLAN_CHANGES in record and isinstance(run_id, str):
            base = plans.get(run_id)
            if base is None:
                raise ValueError(
                    f"line of cycle {record.get('step_number')} of run {run_id} carries plan changes, but no "
                    "earlier line of that run carries its plan: the log was cut"
                )
            changed = {step["step_id"]: step for step in record[PLAN_CHANGES]}
            plan = {**base, "steps": [changed.get(step["step_id"], step) for step in base["steps"]]}
            record = {key: value for key, value in record.items() if key != PLAN_CHANGES}
            record["plan_state"] = plans[run_id] = plan
        elif isinstance(record.get("plan_state"), dict) and isinstance(run_id, str):
            plans[run_id] = record["plan_state"]
        yield record


def read_log(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every line of the JSONL log at ``path``, decoded, with ``plan_state`` on every cycle's line."""
    with Path(path).open(encoding="utf-8") as file:
        yield from expand_log(json.loads(line) for line in file if line.strip())
