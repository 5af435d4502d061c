"""The rules of spec 003's data model (``003-models.md``): TaskProfile, ValidationIssue, SemanticValidationReport,
RefinementAction, ConvergenceAssessment, and PlanStep's spec-003 additions."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel.models import ConvergenceAssessment, Plan, PlanStep, StepStatus
from aeon_kernel.reasoning.models import (
    SEVERITY_ORDER,
    RefinementAction,
    SemanticValidationReport,
    TaskProfile,
    ValidationIssue,
)

PROFILE: dict[str, Any] = {
    "reasoning_depth": 3,
    "information_sufficiency": 0.5,
    "expected_tool_usage": "moderate",
    "output_breadth": "moderate",
    "confidence_requirement": "medium",
    "raw_inference": "judged from the request",
}
SEVERITIES = ("LOW", "MEDIUM", "HIGH", "CRITICAL")
ISSUE_TYPES = ("specificity", "relevance", "consistency", "hallucination", "do_say_mismatch")

# --- TaskProfile ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"reasoning_depth": 1},
        {"reasoning_depth": 5},
        {"information_sufficiency": 0.0},
        {"information_sufficiency": 1.0},
        *({"expected_tool_usage": v} for v in ("none", "minimal", "moderate", "extensive")),
        *({"output_breadth": v} for v in ("narrow", "moderate", "broad")),
        *({"confidence_requirement": v} for v in ("low", "medium", "high")),
        {"profile_version": 42},
    ],
)
def test_task_profile_accepts_every_value_within_bounds(change: dict[str, Any]) -> None:
    profile = TaskProfile(**{**PROFILE, **change})
    assert {k: getattr(profile, k) for k in change} == change


@pytest.mark.parametrize(
    "change",
    [
        {"reasoning_depth": 0},
        {"reasoning_depth": 6},
        {"information_sufficiency": -0.01},
        {"information_sufficiency": 1.01},
        {"information_sufficiency": float("nan")},
        {"expected_tool_usage": "some"},
        {"output_breadth": "wide"},
        {"confidence_requirement": "certain"},
        {"raw_inference": ""},
        {"raw_inference": "   "},
        {"profile_version": 0},
    ],
)
def test_task_profile_refuses_values_out_of_bounds(change: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        TaskProfile(**{**PROFILE, **change})


@pytest.mark.parametrize("missing", sorted(set(PROFILE)))
def test_task_profile_needs_every_dimension(missing: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        TaskProfile(**{k: v for k, v in PROFILE.items() if k != missing})


def test_the_default_profile_is_the_specs() -> None:
    default = TaskProfile.default()
    assert default.profile_version == 1
    assert (
        default.reasoning_depth,
        default.information_sufficiency,
        default.expected_tool_usage,
        default.output_breadth,
        default.confidence_requirement,
    ) == (3, 0.5, "moderate", "moderate", "medium")
    assert "default" in default.raw_inference
    assert "the model timed out" in TaskProfile.default("the model timed out").raw_inference


def test_an_updated_profile_is_a_new_validated_version() -> None:
    profile = TaskProfile(**PROFILE)
    deeper = profile.updated(reasoning_depth=5)
    assert (deeper.profile_version, deeper.reasoning_depth) == (2, 5)
    assert (profile.profile_version, profile.reasoning_depth) == (1, 3)  # frozen: the old one is unchanged
    assert deeper.updated().profile_version == 3
    assert deeper.updated(profile_version=99).profile_version == 3  # the version is not the caller's to set
    with pytest.raises(pydantic.ValidationError):
        profile.updated(reasoning_depth=9)
    with pytest.raises(pydantic.ValidationError):
        profile.reasoning_depth = 4  # type: ignore[misc]


# --- ValidationIssue and SemanticValidationReport ---------------------------------------------------------------


def issue(
    n: int, type_: str = "relevance", severity: str = "LOW", repair: str | None = None
) -> ValidationIssue:
    return ValidationIssue(
        issue_id=f"i{n}", type=type_, severity=severity, description=f"issue {n}", proposed_repair=repair
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"issue_id": ""},
        {"description": ""},
        {"type": "style"},
        {"severity": "low"},
        {"severity": "BLOCKER"},
    ],
)
def test_validation_issue_refuses_bad_fields(fields: dict[str, Any]) -> None:
    base = {"issue_id": "i", "type": "relevance", "severity": "LOW", "description": "d"}
    with pytest.raises(pydantic.ValidationError):
        ValidationIssue(**{**base, **fields})


def test_validation_issue_location_and_repair_are_optional() -> None:
    found = ValidationIssue(issue_id="i", type="hallucination", severity="HIGH", description="d")
    assert found.location is None and found.proposed_repair is None
    assert ValidationIssue(**{**found.model_dump(), "location": "2", "proposed_repair": "r"}).location == "2"


def test_a_report_without_issues_is_low_with_an_empty_summary() -> None:
    for report in (
        SemanticValidationReport(validation_id="v", artifact_type="plan"),
        SemanticValidationReport.of("v", "plan"),
    ):
        assert report.overall_severity == "LOW"
        assert report.issue_summary == {} and report.issues == () and report.proposed_repairs == ()


@pytest.mark.parametrize("artifact", ["plan", "step", "execution_artifact", "cross_phase"])
def test_a_report_is_about_one_of_the_specs_artifact_types(artifact: str) -> None:
    assert SemanticValidationReport(validation_id="v", artifact_type=artifact).artifact_type == artifact


@pytest.mark.parametrize("fields", [{"artifact_type": "answer"}, {"validation_id": ""}])
def test_a_report_refuses_bad_fields(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        SemanticValidationReport(**{"validation_id": "v", "artifact_type": "plan", **fields})


issue_lists = st.lists(
    st.tuples(st.sampled_from(ISSUE_TYPES), st.sampled_from(SEVERITIES), st.none() | st.just("fix it")),
    max_size=8,
).map(lambda found: [issue(n, *f) for n, f in enumerate(found)])


@given(issue_lists)
def test_a_reports_severity_and_summary_are_derived_from_its_issues(issues: list[ValidationIssue]) -> None:
    report = SemanticValidationReport.of("v", "step", issues)
    highest = max((SEVERITY_ORDER[i.severity] for i in issues), default=0)
    assert SEVERITY_ORDER[report.overall_severity] == highest
    assert report.issue_summary == dict(Counter(i.type for i in issues))
    assert sum(report.issue_summary.values()) == len(issues)
    assert report.proposed_repairs == tuple(i.proposed_repair for i in issues if i.proposed_repair)
    # the same report, written out in full, validates; a copy through JSON too
    assert SemanticValidationReport(**dict(report)) == report
    assert SemanticValidationReport.model_validate_json(report.model_dump_json()) == report


@given(issue_lists, st.sampled_from(SEVERITIES))
def test_a_report_whose_severity_is_not_the_highest_is_refused(
    issues: list[ValidationIssue], severity: str
) -> None:
    derived = SemanticValidationReport.of("v", "plan", issues)
    fields = {**dict(derived), "overall_severity": severity}
    if severity == derived.overall_severity:
        assert SemanticValidationReport(**fields) == derived
    else:
        with pytest.raises(pydantic.ValidationError, match="overall_severity"):
            SemanticValidationReport(**fields)


def test_a_report_whose_summary_miscounts_is_refused() -> None:
    issues = (
        issue(1, "relevance", "HIGH"),
        issue(2, "relevance", "LOW"),
        issue(3, "hallucination", "MEDIUM"),
    )
    base = {"validation_id": "v", "artifact_type": "plan", "issues": issues, "overall_severity": "HIGH"}
    assert (
        SemanticValidationReport(**base, issue_summary={"relevance": 2, "hallucination": 1}).issues == issues
    )
    for wrong in (
        {"relevance": 1, "hallucination": 1},
        {"relevance": 2},
        {"relevance": 2, "hallucination": 2},
    ):
        with pytest.raises(pydantic.ValidationError, match="issue_summary"):
            SemanticValidationReport(**base, issue_summary=wrong)
    with pytest.raises(pydantic.ValidationError):
        SemanticValidationReport(**{**base, "overall_severity": "CRITICAL"})


# --- RefinementAction ----------------------------------------------------------------------------------------------


NEW = PlanStep(step_id="9", description="new")


@pytest.mark.parametrize(
    "fields",
    [
        {"action_type": "ADD", "target_step_id": "1", "new_step": NEW},
        {"action_type": "ADD", "target_plan_section": "end", "new_step": NEW},
        {"action_type": "ADD", "target_plan_section": "start", "new_step": NEW},
        {"action_type": "ADD", "target_plan_section": "goal", "new_step": NEW},
        {"action_type": "MODIFY", "target_step_id": "1", "new_step": NEW},
        {"action_type": "REMOVE", "target_step_id": "1"},
        {"action_type": "REPLACE", "target_step_id": "1", "new_step": NEW},
        {
            "action_type": "REPLACE",
            "target_step_id": "1",
            "new_steps": (NEW, NEW.model_copy(update={"step_id": "8"})),
        },
    ],
)
def test_well_formed_actions(fields: dict[str, Any]) -> None:
    action = RefinementAction(reason="why", **fields)
    assert action.replacement() == (fields.get("new_steps") or ((NEW,) if "new_step" in fields else ()))
    assert RefinementAction.model_validate_json(action.model_dump_json()) == action


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        # exactly one of target_step_id and target_plan_section
        ({"action_type": "ADD", "new_step": NEW}, "exactly one"),
        ({"action_type": "REMOVE"}, "exactly one"),
        (
            {"action_type": "ADD", "target_step_id": "1", "target_plan_section": "end", "new_step": NEW},
            "exactly one",
        ),
        ({"action_type": "REMOVE", "target_step_id": "1", "target_plan_section": "start"}, "exactly one"),
        # new_step for ADD and MODIFY, new_step or new_steps for REPLACE
        ({"action_type": "ADD", "target_step_id": "1"}, "ADD needs new_step"),
        ({"action_type": "ADD", "target_plan_section": "end", "new_steps": (NEW,)}, "ADD needs new_step"),
        ({"action_type": "MODIFY", "target_step_id": "1"}, "MODIFY needs new_step"),
        ({"action_type": "REPLACE", "target_step_id": "1"}, "REPLACE needs"),
        # MODIFY, REMOVE and REPLACE are about a step, not a section
        ({"action_type": "MODIFY", "target_plan_section": "end", "new_step": NEW}, "target_step_id"),
        ({"action_type": "REMOVE", "target_plan_section": "end"}, "target_step_id"),
        ({"action_type": "REPLACE", "target_plan_section": "start", "new_step": NEW}, "target_step_id"),
        # the enumerations and the reason
        ({"action_type": "DELETE", "target_step_id": "1"}, "action_type"),
        ({"action_type": "ADD", "target_plan_section": "middle", "new_step": NEW}, "target_plan_section"),
        ({"action_type": "REMOVE", "target_step_id": "1", "reason": ""}, "reason"),
    ],
)
def test_malformed_actions_are_refused(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=match):
        RefinementAction(**{"reason": "why", **fields})


def test_an_action_carries_the_issues_that_triggered_it() -> None:
    found = issue(1, "consistency", "HIGH")
    action = RefinementAction(
        action_type="REMOVE",
        target_step_id="2",
        reason="contradicts step 1",
        semantic_validation_input=(found,),
        inconsistency_detected=True,
        changes={"why": "duplicate"},
    )
    again = RefinementAction.model_validate(json.loads(action.model_dump_json()))
    assert again == action and again.semantic_validation_input == (found,) and again.inconsistency_detected


# --- ConvergenceAssessment -----------------------------------------------------------------------------------------


def test_an_assessment_that_has_not_converged_says_why() -> None:
    with pytest.raises(pydantic.ValidationError, match="reason code"):
        ConvergenceAssessment(converged=False)
    with pytest.raises(pydantic.ValidationError, match="reason code"):
        ConvergenceAssessment(converged=False, reason_codes=(), completeness_score=0.5)
    assert ConvergenceAssessment(converged=False, reason_codes=("incomplete",)).reason_codes == (
        "incomplete",
    )
    assert (
        ConvergenceAssessment(converged=True, completeness_score=1.0, coherence_score=1.0).reason_codes == ()
    )


@pytest.mark.parametrize("score", ["completeness_score", "coherence_score"])
@pytest.mark.parametrize("value", [-0.01, 1.01])
def test_assessment_scores_are_between_zero_and_one(score: str, value: float) -> None:
    with pytest.raises(pydantic.ValidationError):
        ConvergenceAssessment(converged=True, **{score: value})
    for bound in (0.0, 1.0):
        assert getattr(ConvergenceAssessment(converged=True, **{score: bound}), score) == bound


def test_an_assessments_empty_consistency_and_issues_are_left_out_of_its_dump() -> None:
    bare = ConvergenceAssessment(converged=True).model_dump(mode="json")
    assert "consistency_status" not in bare and "detected_issues" not in bare
    full = ConvergenceAssessment(
        converged=False,
        reason_codes=("incoherent",),
        consistency_status={"plan_answer": "misaligned"},
        detected_issues=("step 2 contradicts step 1",),
    ).model_dump(mode="json")
    assert full["consistency_status"] == {"plan_answer": "misaligned"}
    assert full["detected_issues"] == ["step 2 contradicts step 1"]
    assert ConvergenceAssessment.model_validate(full).reason_codes == ("incoherent",)


# --- PlanStep's spec-003 additions ---------------------------------------------------------------------------------

SPEC_003_FIELDS = {
    "step_index",
    "total_steps",
    "incoming_context",
    "handoff_to_next",
    "dependencies",
    "provides",
    "clarity_state",
}


@pytest.mark.parametrize(("index", "total"), [(1, 1), (2, 5), (5, 5), (3, None), (None, 4)])
def test_total_steps_is_at_least_the_steps_index(index: int | None, total: int | None) -> None:
    step = PlanStep(step_id="s", description="d", step_index=index, total_steps=total)
    assert (step.step_index, step.total_steps) == (index, total)


@pytest.mark.parametrize(("index", "total"), [(2, 1), (6, 5), (0, 3), (1, 0)])
def test_a_step_numbered_past_the_plans_length_is_refused(index: int, total: int) -> None:
    with pytest.raises(pydantic.ValidationError):
        PlanStep(step_id="s", description="d", step_index=index, total_steps=total)


@given(st.integers(1, 50), st.integers(1, 50))
def test_numbering_rule_over_many_values(index: int, total: int) -> None:
    if total >= index:
        assert (
            PlanStep(step_id="s", description="d", step_index=index, total_steps=total).total_steps == total
        )
    else:
        with pytest.raises(pydantic.ValidationError, match="total_steps"):
            PlanStep(step_id="s", description="d", step_index=index, total_steps=total)


@pytest.mark.parametrize("mode", ["python", "json"])
def test_spec_003_fields_are_left_out_of_a_dump_while_unset(mode: str) -> None:
    step = PlanStep(step_id="1", description="add", tool="calculator", arguments={"expression": "1 + 2"})
    dumped = step.model_dump(mode=mode)
    assert not SPEC_003_FIELDS & set(dumped)
    assert set(dumped) == {
        "step_id",
        "description",
        "status",
        "tool",
        "agent",
        "arguments",
        "errors",
        "result",
        "failure",
    }
    assert not SPEC_003_FIELDS & set(json.loads(step.model_dump_json()))
    plan_dump = Plan(goal="g", steps=(step,)).model_dump(mode=mode)
    assert not SPEC_003_FIELDS & set(plan_dump["steps"][0])
    # empty values count as unset
    empty = PlanStep(
        step_id="1", description="add", incoming_context="", handoff_to_next="", dependencies=(), provides=()
    )
    assert not SPEC_003_FIELDS & set(empty.model_dump(mode=mode))


def test_spec_003_fields_are_in_a_dump_once_set() -> None:
    step = PlanStep(
        step_id="2",
        description="use it",
        status=StepStatus.INVALID,
        step_index=2,
        total_steps=3,
        incoming_context="the sum",
        handoff_to_next="the answer",
        dependencies=("1",),
        provides=("answer",),
        clarity_state="BLOCKED",
    )
    dumped = step.model_dump(mode="json")
    assert set(dumped) >= SPEC_003_FIELDS
    assert (
        dumped["status"] == "invalid"
        and dumped["dependencies"] == ["1"]
        and dumped["clarity_state"] == "BLOCKED"
    )
    assert PlanStep.model_validate(dumped) == step


@pytest.mark.parametrize("clarity", ["clear", "UNKNOWN", ""])
def test_clarity_state_is_one_of_the_specs(clarity: str) -> None:
    with pytest.raises(pydantic.ValidationError):
        PlanStep(step_id="s", description="d", clarity_state=clarity)
