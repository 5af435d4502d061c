"""The ``model`` semantic validator: structural checks in code first, then one best-effort model call.

The real model's behaviour is replayed from a cassette recorded from Gemma 3 270M;
``AEON_RECORD_CASSETTES=1 python3 -m pytest -m model tests/plugins/test_semantic_validator.py`` re-records it.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import LLMAdapter, SemanticValidationReport, SemanticValidator, ToolRegistry, ValidationError
from aeon_kernel.config import AeonConfig
from aeon_kernel.engine import Engine
from aeon_kernel.kit import ModelClient
from aeon_kernel.llm.cassette import RecordingAdapter, ReplayAdapter
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.semantic_validator import (
    EXAMPLE_DESCRIPTION,
    ModelSemanticValidator,
    aeon_register_semantic_validators,
)
from aeon_plugins.supervisor import DefaultSupervisor
from tests.support.watch import Watch

CASSETTE = Path(__file__).resolve().parents[1] / "cassettes" / "reasoning" / "semantic_validator.jsonl"
TOOLS = ToolRegistry([EchoTool(), CalculatorTool()])
NONE: dict[str, Any] = {"issues": []}

GOOD_PLAN = {
    "goal": "Add 5 and 10",
    "steps": [
        {
            "step_id": "1",
            "description": "Add 5 and 10",
            "tool": "calculator",
            "arguments": {"expression": "5 + 10"},
        },
        {"step_id": "2", "description": "Report the sum", "agent": "llm"},
    ],
}
BAD_PLAN = {
    "goal": "Add 5 and 10",
    "steps": [
        {"step_id": "1", "description": "Do stuff", "tool": "calculator"},
        {"step_id": "2", "description": "Write a poem about cats", "agent": "llm"},
    ],
}
RESULTS = {
    "request": "calculate the sum of 5 and 10",
    "goal": "Add 5 and 10",
    "results": [
        {"step_id": "1", "status": "complete", "result": {"expression": "5 + 10", "value": 15}},
        {"step_id": "2", "status": "complete", "result": "The sum of 5 and 10 is 16."},
    ],
}


def issue(
    type_: str = "specificity",
    severity: str = "MEDIUM",
    location: str = "1",
    description: str = "the step is vague",
    repair: str = "say what to add",
) -> dict[str, Any]:
    return {
        "type": type_,
        "severity": severity,
        "location": location,
        "description": description,
        "repair": repair,
    }


def make(
    responses: list[Any], *, constrained: bool = False, **options: Any
) -> tuple[ModelSemanticValidator, ScriptedLLM]:
    scripted = ScriptedLLM(responses)
    scripted.supports_json_schema = constrained
    llm = ModelClient(scripted, sleep=lambda _: None)
    validator = SchemaValidator()
    return ModelSemanticValidator(
        llm, validator, DefaultSupervisor(llm, validator, TOOLS), **options
    ), scripted


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"goal": "Add 5 and 10", "steps": list(steps)}


def kinds(report: SemanticValidationReport) -> list[tuple[str, str, str | None]]:
    return [(i.type, i.severity, i.location) for i in report.issues]


# --- structure first ----------------------------------------------------------------------------------------------


def test_duplicate_step_ids_decide_alone_without_the_model() -> None:
    validator, scripted = make([NONE])
    report = validator.validate(
        plan({"step_id": "1", "description": "a"}, {"step_id": "1", "description": "b"}), "plan"
    )
    assert kinds(report) == [("consistency", "CRITICAL", "1")]
    assert report.overall_severity == "CRITICAL" and report.issue_summary == {"consistency": 1}
    assert scripted.prompts == []


@pytest.mark.parametrize(
    "artifact",
    [{"goal": "g"}, {"goal": "g", "steps": "not a list"}, {}, {"results": []}],
    ids=["no-steps", "steps-not-a-list", "empty", "results-are-not-a-plan"],
)
def test_a_plan_without_a_step_list_is_critical_without_the_model(artifact: dict[str, Any]) -> None:
    validator, scripted = make([NONE])
    report = validator.validate(artifact, "plan")
    assert kinds(report) == [("consistency", "CRITICAL", "plan")]
    assert scripted.prompts == []


def test_a_step_that_is_not_an_object_is_critical() -> None:
    validator, scripted = make([NONE])
    report = validator.validate(plan({"step_id": "1", "description": "a"}, "oops"), "plan")  # type: ignore[arg-type]
    assert kinds(report) == [("consistency", "CRITICAL", "steps[1]")]
    assert scripted.prompts == []


def test_missing_ids_and_descriptions_are_high_and_the_model_is_still_asked() -> None:
    validator, scripted = make([NONE])
    report = validator.validate(
        plan({"description": "no id"}, {"step_id": "2"}, {"step_id": " ", "description": ""}), "plan"
    )
    assert kinds(report) == [
        ("consistency", "HIGH", "steps[0]"),
        ("consistency", "HIGH", "2"),
        ("consistency", "HIGH", "steps[2]"),
        ("consistency", "HIGH", "steps[2]"),
    ]
    assert len(scripted.prompts) == 1


def test_unknown_tools_are_hallucinations_when_a_registry_is_given() -> None:
    artifact = plan(
        {"step_id": "1", "description": "look it up", "tool": "web_search"},
        {"step_id": "2", "description": "add", "tool": "calculator"},
    )
    validator, _ = make([NONE, NONE])
    report = validator.validate(artifact, "plan", TOOLS)
    assert kinds(report) == [("hallucination", "HIGH", "1")]
    assert "web_search" in report.issues[0].description
    assert validator.validate(artifact, "plan").issues == ()  # without a registry, tools are not checked


def test_dependencies_on_unknown_steps_are_medium() -> None:
    validator, _ = make([NONE])
    report = validator.validate(
        plan(
            {"step_id": "1", "description": "a"},
            {"step_id": "2", "description": "b", "dependencies": ["1", "9"]},
        ),
        "plan",
    )
    assert kinds(report) == [("consistency", "MEDIUM", "2")]


def test_a_single_step_artifact() -> None:
    validator, scripted = make([NONE, NONE])
    report = validator.validate({"step_id": "3", "description": "search", "tool": "web"}, "step", TOOLS)
    assert kinds(report) == [("hallucination", "HIGH", "3")]
    assert scripted.prompts[0]["prompt"].rstrip().endswith("Issues:")
    assert "\nStep: " in scripted.prompts[0]["prompt"]
    wrapped = validator.validate(
        {"step": {"step_id": "3", "description": "add", "tool": "calculator"}}, "step", TOOLS
    )
    assert wrapped.issues == ()


def test_execution_artifacts_check_their_tool_calls() -> None:
    validator, scripted = make([NONE])
    artifact = {**RESULTS, "tool_calls": [{"tool_name": "teleport", "step_id": "1", "arguments": {}}]}
    report = validator.validate(artifact, "execution_artifact", TOOLS)
    assert kinds(report) == [("hallucination", "HIGH", "1")]
    assert "\nResults: " in scripted.prompts[0]["prompt"]


def call(expression: str, **extra: Any) -> dict[str, Any]:
    return {"tool_name": "calculator", "step_id": "1", "arguments": {"expression": expression}, **extra}


def test_a_number_the_request_states_that_no_tool_call_used_is_a_high_issue() -> None:
    validator, scripted = make([NONE])
    artifact = {
        "request": "what is 20 percent of 150, plus 7?",
        "results": [],
        "tool_calls": [call("150 * 0.2")],
    }
    report = validator.validate(artifact, "execution_artifact", TOOLS)
    (issue,) = report.issues
    assert (issue.type, issue.severity, issue.location) == ("consistency", "HIGH", "request")
    assert issue.description == (
        "the request states 7, which no tool call used: the part of the request that uses it was not done"
    )
    assert issue.proposed_repair == "add a step that does the part of the request with 7"
    assert len(scripted.prompts) == 1  # a HIGH structural finding does not stop the model's judgement


def test_validate_structure_checks_without_the_model() -> None:
    validator, scripted = make([])
    missing = {"request": "add 2, 3 and 4", "results": [], "tool_calls": [call("2 + 3")]}
    report = validator.validate_structure(missing, "execution_artifact", TOOLS)
    assert [i.description.split(",")[0] for i in report.issues] == ["the request states 4"]
    both = {"request": "add 2 and 5, then 3 and 4", "results": [], "tool_calls": [call("2 + 5")]}
    assert "the request states 3 and 4, which no tool call used: the part of the request that uses them" in (
        validator.validate_structure(both, "execution_artifact", TOOLS).issues[0].description
    )
    assert scripted.prompts == []  # never the model


def test_the_calculators_review_of_the_calls_finds_what_digits_do_not_show() -> None:
    """No number in digits is unused, so each tool's review of its calls speaks: numbers in words, a step left
    out. One finding per tool; none for calls that do what the request says, and none without a tool registry."""
    validator, scripted = make([])
    chain = "subtract three from twenty, then multiply by five"
    dropped = {"request": chain, "results": [], "tool_calls": [call("20 - 3")]}
    (issue,) = validator.validate_structure(dropped, "execution_artifact", TOOLS).issues
    assert (issue.severity, issue.location) == ("HIGH", "request")
    assert issue.description == (
        "calculator's review: The request states 5, which no calculation uses. "
        "The request asks to multiply, which no calculation does."
    )
    done = {**dropped, "tool_calls": [call("20 - 3"), call("17 * 5")]}
    assert validator.validate_structure(done, "execution_artifact", TOOLS).issues == ()
    assert validator.validate_structure(dropped, "execution_artifact").issues == ()
    assert scripted.prompts == []


def test_a_percentage_counts_as_a_share_only_where_it_is_written_as_one() -> None:
    """The plan check's rule (aeon_kernel.unused_numbers): in "20% of 20" the second 20 is no percentage."""
    validator, _ = make([])
    shares_only = {"request": "what is 20% of 20?", "results": [], "tool_calls": [call("0.2 * 0.2")]}
    (issue,) = validator.validate_structure(shares_only, "execution_artifact", TOOLS).issues
    assert issue.description.startswith("the request states 20, which no tool call used")
    both = {"request": "what is 20% of 20?", "results": [], "tool_calls": [call("0.2 * 20")]}
    assert validator.validate_structure(both, "execution_artifact", TOOLS).issues == ()


@pytest.mark.parametrize(
    ("request_text", "calls"),
    [
        ("what is 20% of 150?", [call("150 * 0.2")]),  # a percentage used as a share
        ("what is 20 percent of 150?", [call("150 * 20 / 100")]),
        ("add 2 and 3, then multiply by 4", [call("2 + 3"), call("5 * 4")]),  # across calls (and passes)
        ("what is twelve times 7?", [call("12 * 7")]),  # numbers in words are not read
        ("add 2 and 3", []),  # no tool call: nothing to compare with
        ("add 2 and 3", [call("9 * 9", error=True)]),  # a failed call is not counted, nor checked
        ("add 2 and 3", [{"tool_name": "teleport", "step_id": "1", "arguments": {"x": 5}}]),  # unknown tool
        ("write 3 lines", [{"tool_name": "echo", "step_id": "1", "arguments": {"message": "a 3-line poem"}}]),
    ],
)
def test_no_issue_when_every_stated_number_was_used_or_nothing_can_tell(
    request_text: str, calls: list[dict[str, Any]]
) -> None:
    validator, _ = make([])
    artifact = {"request": request_text, "results": [], "tool_calls": calls}
    report = validator.validate_structure(artifact, "execution_artifact", TOOLS)
    assert [i for i in report.issues if i.location == "request"] == []


def test_a_plan_is_not_checked_against_the_request_numbers() -> None:
    validator, _ = make([])
    plan = {**GOOD_PLAN, "request": "add 5 and 10 and 99"}
    assert validator.validate_structure(plan, "plan", TOOLS).issues == ()


def test_the_contracts_default_structure_check_finds_nothing() -> None:
    class OnlyModel(SemanticValidator):
        def validate(
            self, artifact: Any, artifact_type: Any, tool_registry: Any = None, *, record: Any = None
        ) -> Any:
            raise AssertionError("not asked")

    report = OnlyModel().validate_structure({"request": "add 2 and 3"}, "execution_artifact")
    assert report.issues == () and report.overall_severity == "LOW"


def test_cross_phase_artifacts() -> None:
    validator, _ = make([NONE])
    report = validator.validate({"plan": GOOD_PLAN, "results": RESULTS["results"]}, "cross_phase", TOOLS)
    assert report.artifact_type == "cross_phase" and report.issues == ()
    validator, scripted = make([NONE])
    assert kinds(validator.validate({"answer": "x"}, "cross_phase")) == [
        ("consistency", "CRITICAL", "cross_phase")
    ]
    assert scripted.prompts == []


@pytest.mark.parametrize(
    ("artifact", "artifact_type"),
    [([1, 2], "plan"), ("plan", "plan"), ({"steps": []}, "poem"), ({"steps": []}, None), ({}, ["plan"])],
)
def test_invalid_inputs_are_validation_errors(artifact: Any, artifact_type: Any) -> None:
    validator, scripted = make([NONE])
    with pytest.raises(ValidationError):
        validator.validate(artifact, artifact_type)
    assert scripted.prompts == []


def test_a_registry_that_is_not_a_registry_is_invalid_input() -> None:
    validator, _ = make([NONE])
    with pytest.raises(ValidationError):
        validator.validate(GOOD_PLAN, "plan", ["calculator"])  # type: ignore[arg-type]


# --- the model's judgement ----------------------------------------------------------------------------------------


def test_the_models_issues_join_the_structural_ones() -> None:
    answer = {"issues": [issue(), issue("relevance", "HIGH", "2", "a poem is unrelated", "remove step 2")]}
    validator, scripted = make([answer], constrained=True)
    report = validator.validate(BAD_PLAN, "plan", TOOLS)
    assert kinds(report) == [("specificity", "MEDIUM", "1"), ("relevance", "HIGH", "2")]
    assert report.overall_severity == "HIGH"
    assert report.issue_summary == {"specificity": 1, "relevance": 1}
    assert report.proposed_repairs == ("say what to add", "remove step 2")
    assert all(i.issue_id.startswith(report.validation_id) for i in report.issues)
    assert len({i.issue_id for i in report.issues}) == 2
    (call,) = scripted.prompts
    assert json.dumps(BAD_PLAN) in call["prompt"]


def test_the_schema_is_small_and_bounded() -> None:
    validator, scripted = make([NONE], constrained=True)
    validator.validate(BAD_PLAN, "plan", TOOLS)
    schema = scripted.prompts[0]["json_schema"]
    issues = schema["properties"]["issues"]
    assert issues["maxItems"] == 3
    item = issues["items"]["properties"]
    assert item["location"]["enum"] == ["1", "2", "plan"]
    assert item["severity"]["enum"] == ["LOW", "MEDIUM", "HIGH"]
    assert item["type"]["enum"] == [
        "specificity",
        "relevance",
        "consistency",
        "hallucination",
        "do_say_mismatch",
    ]
    assert item["description"]["maxLength"] <= 200 and item["repair"]["maxLength"] <= 200


def test_result_step_ids_are_locations_too() -> None:
    validator, scripted = make([NONE], constrained=True)
    validator.validate(RESULTS, "execution_artifact")
    schema = scripted.prompts[0]["json_schema"]
    assert schema["properties"]["issues"]["items"]["properties"]["location"]["enum"] == [
        "1",
        "2",
        "execution_artifact",
    ]


def test_a_fourth_issue_breaks_the_schema_and_the_report_keeps_the_structure_only() -> None:
    validator, _ = make([{"issues": [issue()] * 4}, "{}", "{}"])
    report = validator.validate(plan({"step_id": "1", "description": "x", "tool": "web"}), "plan", TOOLS)
    assert kinds(report) == [("hallucination", "HIGH", "1")]


def test_the_same_complaint_twice_counts_once() -> None:
    validator, _ = make([{"issues": [issue(), issue(description="again")]}])
    assert len(validator.validate(BAD_PLAN, "plan").issues) == 1


def test_a_copy_of_the_worked_example_is_dropped() -> None:
    copied = issue("relevance", "HIGH", "2", EXAMPLE_DESCRIPTION, "remove step 2")
    validator, _ = make([{"issues": [copied, issue()]}])
    assert kinds(validator.validate(BAD_PLAN, "plan")) == [("specificity", "MEDIUM", "1")]


def test_max_model_severity_keeps_the_models_judgement_advisory() -> None:
    answer = {"issues": [issue(severity="HIGH"), issue("relevance", "LOW", "2")]}
    validator, _ = make([answer], max_model_severity="MEDIUM")
    report = validator.validate(BAD_PLAN, "plan")
    assert [i.severity for i in report.issues] == ["MEDIUM", "LOW"]
    with pytest.raises(ValidationError):
        make([], max_model_severity="CRITICAL")


@pytest.mark.parametrize(
    "responses",
    [
        pytest.param(["garbage, not JSON", "still garbage", "nope"], id="garbage"),
        pytest.param([{"issues": "none"}, "{}", "{}"], id="wrong-type"),
        pytest.param([{"issues": [issue(severity="FATAL")]}, "{}", "{}"], id="unknown-severity"),
        pytest.param([{"issues": [issue(location="99")]}, "{}", "{}"], id="unknown-location"),
        pytest.param(["", "", ""], id="empty"),
        pytest.param([], id="model-unavailable"),
    ],
)
def test_model_failure_leaves_the_structural_issues_only(responses: list[Any]) -> None:
    validator, _ = make(responses)
    artifact = plan({"step_id": "1", "description": "x", "tool": "web"}, {"step_id": "2"})
    report = validator.validate(artifact, "plan", TOOLS)
    assert kinds(report) == [("hallucination", "HIGH", "1"), ("consistency", "HIGH", "2")]


def test_a_repairable_answer_is_repaired() -> None:
    validator, _ = make(['{"issues": [' + json.dumps(issue()) + ",]}"])
    actions: list[Any] = []
    report = validator.validate(BAD_PLAN, "plan", record=actions.append)
    assert kinds(report) == [("specificity", "MEDIUM", "1")]
    assert [a.method for a in actions] == ["deterministic"]


# --- registration -------------------------------------------------------------------------------------------------


def test_registered_as_the_model_semantic_validator() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_semantic_validators(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["model"]
    assert issubclass(registered[0][1], SemanticValidator)


def test_the_engine_builds_it_with_the_runs_model_and_options(tmp_path: Path) -> None:
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=[{"issues": [issue(severity="HIGH")]}])
        .with_choice("semantic_validator", "model", max_model_severity="LOW")
    )
    plugins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    with Engine(config, plugins=plugins, autoload=False) as engine:
        validator = engine.components.one("semantic_validators")
        assert isinstance(validator, ModelSemanticValidator) and validator.llm is engine.llm
        assert [i.severity for i in validator.validate(BAD_PLAN, "plan").issues] == ["LOW"]


# --- the real model -----------------------------------------------------------------------------------------------


def reports_with(adapter: LLMAdapter) -> tuple[list[SemanticValidationReport], Watch]:
    watch = Watch(adapter)
    llm = ModelClient(watch)
    schema_validator = SchemaValidator()
    validator = ModelSemanticValidator(llm, schema_validator, DefaultSupervisor(llm, schema_validator, TOOLS))
    artifacts = [(GOOD_PLAN, "plan"), (BAD_PLAN, "plan"), (RESULTS, "execution_artifact")]
    return [validator.validate(a, t, TOOLS) for a, t in artifacts], watch


def check_real_reports(reports: list[SemanticValidationReport]) -> None:
    for report, locations in zip(
        reports, [{"1", "2", "plan"}, {"1", "2", "plan"}, {"1", "2", "execution_artifact"}], strict=True
    ):
        again = SemanticValidationReport.model_validate(
            report.model_dump(mode="json")
        )  # derived fields agree
        assert again == report
        assert len(report.issues) <= 3
        assert all(i.location in locations and i.severity != "CRITICAL" for i in report.issues)
        assert all(i.description.strip() and i.description != EXAMPLE_DESCRIPTION for i in report.issues)


def test_replayed_real_model_reports_are_well_formed() -> None:
    """Gemma 3 270M, recorded: well-formed reports; its issues are mostly templated from the example."""
    reports, watch = reports_with(ReplayAdapter(CASSETTE))
    assert watch.errors == []  # every request was in the cassette
    check_real_reports(reports)


@pytest.mark.model
def test_the_real_model_gives_well_formed_reports(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from aeon_plugins.llama_cpp import LlamaCppAdapter

    target = CASSETTE if os.environ.get("AEON_RECORD_CASSETTES") == "1" else tmp_path / "semantic.jsonl"
    target.unlink(missing_ok=True)
    adapter = RecordingAdapter(LlamaCppAdapter(), target)
    try:
        reports, watch = reports_with(adapter)
    finally:
        adapter.close()
    assert watch.errors == []
    check_real_reports(reports)
