"""The ``plan_finished`` convergence engine: a run has converged when every step is complete or failed (FR-004)."""

from __future__ import annotations

from typing import Any

from aeon_kernel import ConvergenceAssessment, ConvergenceEngine, Register, hookimpl
from aeon_kernel.kit import plan_progress


class PlanFinished(ConvergenceEngine):
    def assess(
        self,
        plan_state: dict[str, Any],
        execution_results: list[dict[str, Any]],
        semantic_validation_report: Any = None,
        custom_criteria: dict[str, Any] | None = None,
    ) -> ConvergenceAssessment:
        finished, complete, reasons = plan_progress(plan_state)
        return ConvergenceAssessment(
            converged=finished,
            reason_codes=tuple(reasons),
            completeness_score=complete,
            metadata={"judge": "none: this engine checks only that the plan finished"},
        )


@hookimpl
def aeon_register_convergence_engines(register: Register) -> None:
    register("plan_finished", PlanFinished)
