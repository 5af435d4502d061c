"""Spec 003's contracts: what an adaptive-depth heuristic, a semantic validator and a recursive planner implement.

The method names and arguments are the spec's; where a call needed more (a way to report supervisor attempts), the
extra parameter is keyword-only with a default, as in :mod:`aeon_kernel.contracts`. Each kind is registered
through its own hook and chosen by name in ``aeon.toml``; the convergence engine's contract is
:class:`aeon_kernel.contracts.ConvergenceEngine`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from aeon_kernel.contracts import Planner, RecordAction
from aeon_kernel.models import ClarityState, ConvergenceAssessment, Plan
from aeon_kernel.reasoning.models import (
    ArtifactType,
    RefinementAction,
    SemanticValidationReport,
    TaskProfile,
    ValidationIssue,
)
from aeon_kernel.tools import ToolRegistry


class AdaptiveDepth(ABC):
    """Infers a task's profile and turns it into a TTL (phase A), and updates it at pass boundaries (phase D)."""

    @abstractmethod
    def infer_task_profile(
        self,
        task_description: str,
        context: dict[str, Any] | None = None,
        *,
        record: RecordAction | None = None,
    ) -> TaskProfile:
        """The profile of ``task_description``; the default profile when it cannot be inferred."""

    @abstractmethod
    def allocate_ttl(self, task_profile: TaskProfile, global_ttl_limit: int | None = None) -> int:
        """A TTL (cycles) for ``task_profile``: deterministic, at least 1, at most ``global_ttl_limit``."""

    @abstractmethod
    def update_task_profile(
        self,
        current_profile: TaskProfile,
        convergence_assessment: ConvergenceAssessment,
        semantic_validation_report: SemanticValidationReport,
        clarity_states: list[ClarityState],
        *,
        record: RecordAction | None = None,
    ) -> TaskProfile | None:
        """A new profile when the pass showed the task was harder (or easier) than profiled; None otherwise."""


class SemanticValidator(ABC):
    """Judges the quality of a plan, a step or the results (best effort: advisory, never fatal).

    Structural checks (duplicate ids, missing fields, unknown tools) come before any model call.
    """

    @abstractmethod
    def validate(
        self,
        artifact: dict[str, Any],
        artifact_type: ArtifactType,
        tool_registry: ToolRegistry | None = None,
        *,
        record: RecordAction | None = None,
    ) -> SemanticValidationReport: ...

    def validate_structure(
        self,
        artifact: dict[str, Any],
        artifact_type: ArtifactType,
        tool_registry: ToolRegistry | None = None,
    ) -> SemanticValidationReport:
        """The checks that need no model (an Aeon addition): what the multi-pass scheduler asks for where a model
        call would cost more than the task is worth (a shallow task's results). Deterministic, and never raises
        for the artifact's content. By default there are none: a report without issues."""
        return SemanticValidationReport.of("structure-unchecked", artifact_type)


class RecursivePlanner(Planner):
    """A planner that can also refine a plan with deltas and decompose a step into a subplan."""

    @abstractmethod
    def refine_plan(
        self,
        current_plan: Plan,
        validation_issues: list[ValidationIssue],
        convergence_reason_codes: list[str],
        blocked_steps: list[str],
        executed_step_ids: set[str],
        *,
        record: RecordAction | None = None,
        tool_registry: ToolRegistry | None = None,
    ) -> list[RefinementAction]:
        """Deltas for the plan's pending or invalid steps; never for ``executed_step_ids``.

        ``tool_registry`` (an Aeon addition) names the tools new steps may use.
        """

    @abstractmethod
    def create_subplan(
        self,
        parent_step_id: str,
        parent_step_description: str,
        current_depth: int,
        max_depth: int = 5,
        *,
        record: RecordAction | None = None,
        tool_registry: ToolRegistry | None = None,
    ) -> Plan:
        """The steps that decompose one step; raises ``NestingDepthError`` when ``current_depth >= max_depth``."""

    def propose_parts(self, request: str, *, record: RecordAction | None = None) -> list[str]:
        """The operations ``request`` sequences, in order, for a scheduler whose own split found one (an Aeon
        addition, issue 26); the scheduler checks them before it uses them. By default ``[request]``: no split."""
        return [request]
