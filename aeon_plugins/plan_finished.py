"""The ``plan_finished`` convergence engine: a run has converged when every step is complete or failed (FR-004)."""

from __future__ import annotations

from typing import Any

from aeon_kernel import ConvergenceAssessment, ConvergenceEngine, Register, hookimpl


class PlanFinished(ConvergenceEngine):
    def assess(
        self,
        plan_state: dict[str, Any],
        execution_results: list[dict[str, Any]],
        semantic_validation_report: Any = None,
        custom_criteria: dict[str, Any] | None = None,
    ) -> ConvergenceAssessment:
        steps = plan_state.get("steps") or []
        statuses = [step.get("status") for step in steps]
        finished = bool(steps) and all(s in ("complete", "failed") for s in statuses)
        reasons = [] if finished else ["steps_unfinished"]
        reasons += [f"step_failed:{step.get('step_id')}" for step in steps if step.get("status") == "failed"]
        complete = statuses.count("complete") / len(steps) if steps else 0.0
        return ConvergenceAssessment(
            converged=finished,
            reason_codes=tuple(reasons),
            completeness_score=complete,
            coherence_score=1.0 if finished else 0.0,
        )


@hookimpl
def aeon_register_convergence_engines(register: Register) -> None:
    register("plan_finished", PlanFinished)
