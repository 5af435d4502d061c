"""Spec 003's data model (``003-models.md``): the task profile, semantic validation, refinement actions, and the
record of a multi-pass run. Frozen, like the rest of the data model; each rule of the spec is a validator here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from aeon_kernel.models import ConvergenceAssessment, FrozenModel, Plan, PlanStep, RunStatus, utc_now

ToolUsage = Literal["none", "minimal", "moderate", "extensive"]
Breadth = Literal["narrow", "moderate", "broad"]
Confidence = Literal["low", "medium", "high"]


class TaskProfile(FrozenModel):
    """How hard a task looks, along the dimensions adaptive depth allocates TTL by (phase A)."""

    profile_version: int = Field(default=1, ge=1)
    reasoning_depth: int = Field(ge=1, le=5)
    information_sufficiency: float = Field(ge=0.0, le=1.0)
    expected_tool_usage: ToolUsage
    output_breadth: Breadth
    confidence_requirement: Confidence
    raw_inference: str = Field(min_length=1)

    @field_validator("raw_inference")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("raw_inference must say how the dimensions were judged")
        return value

    @classmethod
    def default(cls, why: str = "inference failed") -> TaskProfile:
        """003-models.md's default, used when the profile cannot be inferred."""
        return cls(
            reasoning_depth=3,
            information_sufficiency=0.5,
            expected_tool_usage="moderate",
            output_breadth="moderate",
            confidence_requirement="medium",
            raw_inference=f"default profile ({why})",
        )

    def updated(self, **changes: Any) -> TaskProfile:
        """A new version of this profile (``profile_version`` + 1), validated."""
        data = {**self.model_dump(), **changes, "profile_version": self.profile_version + 1}
        return TaskProfile.model_validate(data)


Severity = Literal["LOW", "MEDIUM", "HIGH", "CRITICAL"]
SEVERITY_ORDER: Final[dict[str, int]] = {"LOW": 0, "MEDIUM": 1, "HIGH": 2, "CRITICAL": 3}
IssueType = Literal["specificity", "relevance", "consistency", "hallucination", "do_say_mismatch"]
ArtifactType = Literal["plan", "step", "execution_artifact", "cross_phase"]


class ValidationIssue(FrozenModel):
    issue_id: str = Field(min_length=1)
    type: IssueType
    severity: Severity
    description: str = Field(min_length=1)
    #: a step id or an artifact reference
    location: str | None = None
    proposed_repair: str | None = None


class SemanticValidationReport(FrozenModel):
    """What a semantic validator found in one artifact. ``overall_severity`` is the highest issue's (LOW if none)."""

    validation_id: str = Field(min_length=1)
    artifact_type: ArtifactType
    issues: tuple[ValidationIssue, ...] = ()
    overall_severity: Severity = "LOW"
    issue_summary: dict[str, int] = Field(default_factory=dict)
    proposed_repairs: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _derived_fields_agree(self) -> SemanticValidationReport:
        highest = max((i.severity for i in self.issues), key=SEVERITY_ORDER.__getitem__, default="LOW")
        if self.overall_severity != highest:
            raise ValueError(
                f"overall_severity is {self.overall_severity} but the highest issue is {highest}"
            )
        counts = dict(Counter(i.type for i in self.issues))
        if self.issue_summary and self.issue_summary != counts:
            raise ValueError(f"issue_summary {self.issue_summary} does not count the issues ({counts})")
        return self

    @classmethod
    def of(
        cls, validation_id: str, artifact_type: ArtifactType, issues: list[ValidationIssue] | tuple[()] = ()
    ) -> SemanticValidationReport:
        """A report whose severity, summary and repairs are derived from ``issues``."""
        found = tuple(issues)
        return cls(
            validation_id=validation_id,
            artifact_type=artifact_type,
            issues=found,
            overall_severity=max((i.severity for i in found), key=SEVERITY_ORDER.__getitem__, default="LOW"),
            issue_summary=dict(Counter(i.type for i in found)),
            proposed_repairs=tuple(i.proposed_repair for i in found if i.proposed_repair),
        )


ActionType = Literal["ADD", "MODIFY", "REMOVE", "REPLACE"]


class RefinementAction(FrozenModel):
    """One delta to a plan (spec 003): the kernel applies it, the module only proposes it.

    ``target_step_id`` names the step the action is about (for ADD: the step the new one goes after); a plan
    section (``target_plan_section``: ``"start"``, ``"end"`` or ``"goal"``) is the alternative. ``new_step`` is
    required for ADD, MODIFY and REPLACE; for REPLACE ``new_steps`` may list several steps (a subplan).
    """

    action_type: ActionType
    target_step_id: str | None = None
    target_plan_section: Literal["start", "end", "goal"] | None = None
    new_step: PlanStep | None = None
    new_steps: tuple[PlanStep, ...] = ()
    changes: dict[str, Any] = Field(default_factory=dict)
    reason: str = Field(min_length=1)
    semantic_validation_input: tuple[ValidationIssue, ...] = ()
    inconsistency_detected: bool = False

    @model_validator(mode="after")
    def _well_formed(self) -> Self:
        if (self.target_step_id is None) == (self.target_plan_section is None):
            raise ValueError("a refinement action has exactly one of target_step_id and target_plan_section")
        if self.action_type in ("ADD", "MODIFY") and self.new_step is None:
            raise ValueError(f"{self.action_type} needs new_step")
        if self.action_type == "REPLACE" and self.new_step is None and not self.new_steps:
            raise ValueError("REPLACE needs new_step or new_steps")
        if self.action_type in ("MODIFY", "REMOVE", "REPLACE") and self.target_step_id is None:
            raise ValueError(f"{self.action_type} targets a step: give target_step_id")
        return self

    def replacement(self) -> tuple[PlanStep, ...]:
        """The steps that take the target's place (MODIFY, REPLACE) or follow it (ADD)."""
        return self.new_steps or ((self.new_step,) if self.new_step is not None else ())


PassPhase = Literal["A", "B", "C", "D"]


class ExecutionPass(FrozenModel):
    """One iteration of the multi-pass loop (pass 0 writes the initial plan)."""

    pass_number: int = Field(ge=0)
    phase: PassPhase
    plan_snapshot: Plan | None = None
    execution_results: tuple[dict[str, Any], ...] = ()
    assessment: ConvergenceAssessment | None = None
    report: SemanticValidationReport | None = None
    refinements: tuple[RefinementAction, ...] = ()
    ttl_remaining: int = Field(ge=0)
    started: str = Field(default_factory=utc_now)
    ended: str | None = None
    duration_ms: float | None = None
    completed: bool = False


class ExecutionHistory(FrozenModel):
    """The whole multi-pass run, returned with its result."""

    execution_id: str
    task_input: str
    configuration: dict[str, Any] = Field(default_factory=dict)
    profile: TaskProfile | None = None
    passes: tuple[ExecutionPass, ...] = ()
    final_result: dict[str, Any] = Field(default_factory=dict)
    total_passes: int = 0
    total_refinements: int = 0
    converged: bool = False
    status: RunStatus = "running"
    total_ms: float = 0.0
