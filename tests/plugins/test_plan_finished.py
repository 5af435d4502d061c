"""The ``plan_finished`` convergence engine: converged exactly when every step is finished (FR-004)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import ConvergenceEngine, OrchestrationState, Plan, PlanStep, StepStatus
from aeon_kernel.runtime.state import RunState
from aeon_plugins.plan_finished import PlanFinished, aeon_register_convergence_engines

ENGINE = PlanFinished()
TERMINAL = ("complete", "failed")


def plan_state(*statuses: str) -> dict[str, Any]:
    steps = [{"step_id": f"s{i}", "description": f"step {i}", "status": s} for i, s in enumerate(statuses, 1)]
    return {"goal": "g", "steps": steps}


def test_all_complete() -> None:
    result = ENGINE.assess(plan_state("complete", "complete"), [])
    assert result.converged is True
    assert result.reason_codes == ()
    assert result.completeness_score == 1.0
    assert result.coherence_score is None  # this engine does not judge coherence: not measured
    assert result.metadata["judge"] == "none: this engine checks only that the plan finished"


def test_finished_with_failures_is_converged_and_names_each_failed_step() -> None:
    result = ENGINE.assess(plan_state("failed", "complete", "failed", "complete"), [])
    assert result.converged is True
    assert result.reason_codes == ("step_failed:s1", "step_failed:s3")
    assert result.completeness_score == 0.5


@pytest.mark.parametrize(
    "statuses",
    [
        ("pending",),
        ("running",),
        ("complete", "running"),
        ("complete", "pending"),
        ("failed", "complete", "pending"),
    ],
)
def test_unfinished_plans_have_not_converged(statuses: tuple[str, ...]) -> None:
    result = ENGINE.assess(plan_state(*statuses), [])
    assert result.converged is False
    assert result.reason_codes[0] == "steps_unfinished"
    assert result.coherence_score is None  # not measured, finished or not


def test_unfinished_and_failed_reasons_together() -> None:
    result = ENGINE.assess(plan_state("failed", "running", "pending"), [])
    assert result.converged is False
    assert result.reason_codes == ("steps_unfinished", "step_failed:s1")
    assert result.completeness_score == 0.0


@pytest.mark.parametrize("state", [{}, {"goal": "g"}, {"goal": "g", "steps": []}, {"steps": None}])
def test_no_steps_is_not_converged(state: dict[str, Any]) -> None:
    result = ENGINE.assess(state, [])
    assert result.converged is False
    assert result.reason_codes == ("steps_unfinished",)
    assert result.completeness_score == 0.0


def test_unknown_statuses_do_not_count_as_finished() -> None:
    result = ENGINE.assess(plan_state("complete", "done"), [])
    assert result.converged is False


@given(st.lists(st.sampled_from([s.value for s in StepStatus]), min_size=1, max_size=12))
def test_matches_the_definition(statuses: list[str]) -> None:
    result = ENGINE.assess(plan_state(*statuses), [{"ignored": True}])
    finished = all(s in TERMINAL for s in statuses)
    assert result.converged is finished
    assert result.completeness_score == pytest.approx(statuses.count("complete") / len(statuses))
    assert ("steps_unfinished" in result.reason_codes) is not finished
    failed = [f"step_failed:s{i}" for i, s in enumerate(statuses, 1) if s == "failed"]
    assert [r for r in result.reason_codes if r.startswith("step_failed:")] == failed


def test_agrees_with_plan_is_finished_on_real_plans() -> None:
    plan = Plan(
        goal="g", steps=(PlanStep(step_id="a", description="a"), PlanStep(step_id="b", description="b"))
    )
    run = RunState(OrchestrationState(run_id="r", request="q", plan=plan, ttl_remaining=5))
    plans = [run.plan()]
    for step_id, status in [
        ("a", StepStatus.RUNNING),
        ("a", StepStatus.COMPLETE),
        ("b", StepStatus.RUNNING),
        ("b", StepStatus.FAILED),
    ]:
        run.transition(step_id, status)
        plans.append(run.snapshot().plan)  # snapshots never change, so each keeps the plan of its moment
    verdicts = [ENGINE.assess(p.model_dump(mode="json"), []).converged for p in plans if p is not None]
    assert verdicts == [p.is_finished for p in plans if p is not None] == [False, False, False, False, True]


def test_registered_as_a_convergence_engine() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_convergence_engines(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["plan_finished"]
    assert isinstance(registered[0][1](), ConvergenceEngine)
