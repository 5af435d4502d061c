"""The ``model`` convergence engine: completeness in code, coherence and consistency judged by the model.

The real model's behaviour is replayed from a cassette recorded from Gemma 3 270M;
``AEON_RECORD_CASSETTES=1 python3 -m pytest -m model tests/plugins/test_model_convergence.py`` re-records it.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import (
    ConvergenceAssessment,
    ConvergenceEngine,
    LLMAdapter,
    SemanticValidationReport,
    ToolRegistry,
    ValidationError,
    ValidationIssue,
)
from aeon_kernel.config import AeonConfig
from aeon_kernel.engine import Engine
from aeon_kernel.kit import ModelClient
from aeon_kernel.llm.cassette import RecordingAdapter, ReplayAdapter
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.model_convergence import (
    EXAMPLE_NOTE,
    JUDGE_SCHEMA,
    ModelConvergence,
    aeon_register_convergence_engines,
)
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor
from tests.support.watch import Watch

CASSETTE = Path(__file__).resolve().parents[1] / "cassettes" / "reasoning" / "model_convergence.jsonl"


def judged(
    coherence: int = 10, consistency: int = 10, note: str = "the answer gives the computed sum"
) -> dict[str, Any]:
    return {"coherence": coherence, "consistency": consistency, "note": note}


def make(
    responses: list[Any], *, constrained: bool = False, **options: Any
) -> tuple[ModelConvergence, ScriptedLLM]:
    scripted = ScriptedLLM(responses)
    scripted.supports_json_schema = constrained
    llm = ModelClient(scripted, sleep=lambda _: None)
    validator = SchemaValidator()
    engine = ModelConvergence(llm, validator, DefaultSupervisor(llm, validator, ToolRegistry()), **options)
    return engine, scripted


def state(*statuses: str, answer: Any = "The sum of 5 and 10 is 15.", **extra: Any) -> dict[str, Any]:
    steps = []
    for n, status in enumerate(statuses, start=1):
        step: dict[str, Any] = {"step_id": f"s{n}", "description": f"step {n}", "status": status}
        if status == "complete":
            step["result"] = answer if n == len(statuses) else {"value": 15}
        steps.append(step)
    return {"goal": "Add 5 and 10", "steps": steps, **extra}


def results(plan_state: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"step_id": s["step_id"], "status": s["status"], "result": s.get("result")}
        for s in plan_state["steps"]
    ]


def report(*severities: str) -> SemanticValidationReport:
    issues = [
        ValidationIssue(
            issue_id=f"i{n}", type="consistency", severity=s, description=f"problem {n}", location="s1"
        )
        for n, s in enumerate(severities)
    ]
    return SemanticValidationReport.of("r", "execution_artifact", issues)


def assess(
    engine: ModelConvergence, plan_state: dict[str, Any], *args: Any, **kwargs: Any
) -> ConvergenceAssessment:
    return engine.assess(plan_state, results(plan_state), *args, **kwargs)


# --- the deterministic part ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statuses",
    [("pending",), ("complete", "running"), ("complete", "pending"), ("failed", "invalid", "pending")],
)
def test_an_unfinished_plan_is_not_converged_and_the_model_is_not_asked(statuses: tuple[str, ...]) -> None:
    engine, scripted = make([judged()])
    result = assess(engine, state(*statuses))
    assert result.converged is False
    assert (
        result.reason_codes[0] == "steps_unfinished" and "completeness_below_threshold" in result.reason_codes
    )
    assert result.coherence_score is None  # nobody judged it: not measured
    assert result.metadata["judge"] == "skipped: the plan is unfinished"
    assert result.consistency_status["plan_steps"] == "unfinished"
    assert scripted.prompts == []


@pytest.mark.parametrize("plan_state", [{}, {"goal": "g"}, {"goal": "g", "steps": []}, {"steps": None}])
def test_no_steps_is_not_converged(plan_state: dict[str, Any]) -> None:
    engine, scripted = make([])
    result = engine.assess(plan_state, [])
    assert result.converged is False
    assert result.reason_codes == ("steps_unfinished", "completeness_below_threshold")
    assert result.metadata["judge"] == "skipped: no steps"
    assert scripted.prompts == []


def test_a_finished_plan_with_no_complete_step_is_not_judged() -> None:
    engine, scripted = make([])
    result = assess(engine, state("failed", "failed"))
    assert result.converged is False
    assert result.reason_codes == ("step_failed:s1", "step_failed:s2", "completeness_below_threshold")
    assert result.metadata["judge"] == "skipped: no step completed"
    assert scripted.prompts == []


def test_a_shallow_task_is_judged_structurally_without_the_model() -> None:
    """Multi-pass asks the engine on every pass; a shallow task's criteria say ``shallow``: the model is not asked."""
    engine, scripted = make([judged()])
    result = assess(engine, state("complete", "complete"), None, {"shallow": True})
    assert result.converged is True and result.reason_codes == ()
    assert (result.completeness_score, result.coherence_score) == (1.0, None)  # coherence: not measured
    assert result.metadata["judge"] == "skipped: a shallow task (structural checks only)"
    assert result.consistency_status["answer"] == "not judged" and result.detected_issues == ()
    assert scripted.prompts == []
    failed = assess(engine, state("complete", "failed"), None, {"shallow": True})
    assert failed.converged is False
    assert failed.reason_codes == ("step_failed:s2", "completeness_below_threshold")


# --- the judgement and the thresholds -----------------------------------------------------------------------------


def test_complete_coherent_and_consistent_converges() -> None:
    engine, scripted = make([judged(10, 9)], constrained=True)
    result = assess(engine, state("complete", "complete", request="calculate the sum of 5 and 10"))
    assert result.converged is True and result.reason_codes == ()
    assert (result.completeness_score, result.coherence_score) == (1.0, 1.0)
    assert result.consistency_status == {
        "plan_steps": "finished",
        "failed_steps": [],
        "answer": "judged",
        "score": 0.9,
        "threshold": 0.9,
        "consistent": True,
        "semantic_issues": 0,
        "memory": "not checked",
    }
    assert result.metadata["judge"] == {"note": "the answer gives the computed sum"}
    (call,) = scripted.prompts
    assert call["json_schema"] == JUDGE_SCHEMA
    assert call["prompt"].endswith(
        'Request: calculate the sum of 5 and 10\nStep s1 result: {"value": 15}\n'
        "Answer: The sum of 5 and 10 is 15.\nJudgement:"
    )


def test_without_a_request_the_goal_is_judged_against() -> None:
    engine, scripted = make([judged()])
    assess(engine, state("complete"))
    assert "Request: Add 5 and 10\n" in scripted.prompts[0]["prompt"]


def test_a_result_missing_from_the_plan_is_taken_from_the_results() -> None:
    engine, scripted = make([judged()])
    plan_state = state("complete")
    del plan_state["steps"][0]["result"]
    engine.assess(plan_state, [{"step_id": "s1", "status": "complete", "result": "fifteen"}])
    assert "Answer: fifteen\n" in scripted.prompts[0]["prompt"]


def test_the_schema_is_small_and_bounded() -> None:
    props = JUDGE_SCHEMA["properties"]
    assert props["coherence"]["enum"] == props["consistency"]["enum"] == list(range(11))
    assert props["note"]["maxLength"] <= 200 and JUDGE_SCHEMA["additionalProperties"] is False


def test_complete_but_incoherent_is_not_converged_with_a_reason_per_failed_criterion() -> None:
    engine, _ = make([judged(5, 9)])
    result = assess(engine, state("complete", "complete"))
    assert result.converged is False
    assert result.reason_codes == ("coherence_below_threshold",)
    assert (result.completeness_score, result.coherence_score) == (1.0, 0.5)
    engine, _ = make([judged(2, 3)])
    result = assess(engine, state("complete", "complete"))
    assert result.reason_codes == ("coherence_below_threshold", "consistency_below_threshold")
    assert result.consistency_status["consistent"] is False


def test_a_failed_step_lowers_completeness_below_the_default_threshold() -> None:
    engine, _ = make([judged()])
    result = assess(engine, state("complete", "failed", "complete"))
    assert result.converged is False
    assert result.reason_codes == ("step_failed:s2", "completeness_below_threshold")
    assert result.completeness_score == pytest.approx(2 / 3)
    assert result.consistency_status["failed_steps"] == ["s2"]


def test_custom_criteria_override_the_thresholds() -> None:
    engine, _ = make([judged(5, 6)])
    lenient = {"completeness_threshold": 0.6, "coherence_threshold": 0.5, "consistency_threshold": 0.6}
    result = assess(engine, state("complete", "failed", "complete"), None, lenient)
    assert result.converged is True
    assert result.reason_codes == ("step_failed:s2",)  # named, as plan_finished does, but not blocking
    assert result.metadata["thresholds"] == lenient


def test_factory_options_set_thresholds_and_custom_criteria_win() -> None:
    engine, _ = make([judged(8, 8), judged(8, 8)], coherence_threshold=0.8, consistency_threshold=0.8)
    assert assess(engine, state("complete")).converged is True
    strict = assess(engine, state("complete"), None, {"coherence_threshold": 0.85})
    assert strict.reason_codes == ("coherence_below_threshold",)
    assert strict.metadata["thresholds"]["consistency_threshold"] == 0.8


@pytest.mark.parametrize(
    "criteria",
    [
        {"coherence_threshold": 1.5},
        {"completeness_threshold": -0.1},
        {"consistency_threshold": "high"},
        {"coherence_threshold": True},
    ],
)
def test_invalid_criteria_are_validation_errors(criteria: dict[str, Any]) -> None:
    engine, scripted = make([judged()])
    with pytest.raises(ValidationError):
        assess(engine, state("complete"), None, criteria)
    with pytest.raises(ValidationError):
        make([], **criteria)
    assert scripted.prompts == []


def test_unknown_criteria_are_ignored() -> None:
    engine, _ = make([judged()])
    assert assess(engine, state("complete"), None, {"style": "terse"}).converged is True


@pytest.mark.parametrize(
    ("plan_state", "results_", "criteria"),
    [("plan", [], None), ({"steps": []}, "results", None), ({"steps": []}, [], ["completeness_threshold"])],
)
def test_invalid_inputs_are_validation_errors(plan_state: Any, results_: Any, criteria: Any) -> None:
    engine, _ = make([])
    with pytest.raises(ValidationError):
        engine.assess(plan_state, results_, None, criteria)


# --- the semantic validation report -------------------------------------------------------------------------------


@pytest.mark.parametrize("severity", ["HIGH", "CRITICAL"])
def test_serious_semantic_issues_block_convergence(severity: str) -> None:
    engine, _ = make([judged()])
    result = assess(engine, state("complete", "complete"), report("LOW", severity, "MEDIUM"))
    assert result.converged is False
    assert result.reason_codes == ("semantic_issues",)
    assert result.detected_issues == (f"{severity} consistency at s1: problem 1",)
    assert result.consistency_status["semantic_issues"] == 1


def test_minor_semantic_issues_do_not_block() -> None:
    engine, _ = make([judged()])
    result = assess(engine, state("complete"), report("LOW", "MEDIUM"))
    assert result.converged is True and result.detected_issues == ()


def test_a_report_given_as_json_is_read_and_a_bad_one_refused() -> None:
    engine, _ = make([judged()])
    result = assess(engine, state("complete"), report("HIGH").model_dump(mode="json"))
    assert result.reason_codes == ("semantic_issues",)
    with pytest.raises(ValidationError):
        assess(engine, state("complete"), {"validation_id": "x", "artifact_type": "poem"})
    with pytest.raises(ValidationError):
        assess(engine, state("complete"), "all fine")


# --- when the judge fails -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "responses",
    [
        pytest.param(["not JSON", "not JSON", "not JSON"], id="garbage"),
        pytest.param([{"coherence": "high", "consistency": 9, "note": "x"}, "{}", "{}"], id="wrong-type"),
        pytest.param([judged(11), "{}", "{}"], id="out-of-range"),
        pytest.param([{"coherence": 0.9, "consistency": 0.9, "note": "x"}, "{}", "{}"], id="fractions"),
        pytest.param(["", "", ""], id="empty"),
        pytest.param([], id="model-unavailable"),
        pytest.param([judged(10, 10, EXAMPLE_NOTE)], id="a-copy-of-the-example"),
    ],
)
def test_a_failed_judge_leaves_the_deterministic_verdict(responses: list[Any]) -> None:
    engine, _ = make(responses)
    result = assess(engine, state("complete", "complete"))
    assert result.converged is True  # never held back because the judge could not speak
    assert result.reason_codes == ()
    assert result.coherence_score is None and result.completeness_score == 1.0  # not judged: not measured
    assert result.metadata["judge"] == "unavailable" and result.metadata["judge_error"]
    assert (
        result.consistency_status["answer"] == "not judged"
        and result.consistency_status["consistent"] is None
    )
    assert result.detected_issues == ("judge_unavailable: coherence and consistency were not judged",)


def test_a_failed_judge_is_named_when_the_run_has_not_converged_anyway() -> None:
    engine, _ = make([])
    result = assess(engine, state("complete", "failed"))
    assert result.converged is False
    assert result.reason_codes == ("step_failed:s2", "completeness_below_threshold", "judge_unavailable")


@given(
    st.lists(
        st.sampled_from(["pending", "running", "complete", "failed", "invalid"]), min_size=1, max_size=8
    ),
    st.integers(0, 10),
    st.integers(0, 10),
)
def test_the_contract_holds_for_any_plan_and_judgement(
    statuses: list[str], coherence: int, consistency: int
) -> None:
    engine, _ = make([judged(coherence, consistency)])
    result = assess(engine, state(*statuses))
    finished = all(s in ("complete", "failed") for s in statuses)
    judged_ = finished and "complete" in statuses  # the judge is asked only then
    assert 0.0 <= result.completeness_score <= 1.0
    assert result.coherence_score == (coherence / 10 if judged_ else None)  # None: not measured
    assert result.converged or result.reason_codes
    all_complete = all(s == "complete" for s in statuses)
    assert result.converged is (all_complete and coherence >= 9 and consistency >= 9)
    assert ("steps_unfinished" in result.reason_codes) is not finished


# --- registration -------------------------------------------------------------------------------------------------


def test_registered_as_the_model_convergence_engine() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_convergence_engines(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["model"]
    assert issubclass(registered[0][1], ConvergenceEngine)


def test_the_engine_builds_it_with_the_runs_model_and_options() -> None:
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=[judged(7, 7)])
        .with_choice("convergence", "model", coherence_threshold=0.7, consistency_threshold=0.7)
    )
    plugins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    with Engine(config, plugins=plugins, autoload=False) as engine:
        convergence = engine.convergence
        assert isinstance(convergence, ModelConvergence) and convergence.llm is engine.llm
        assert assess(convergence, state("complete")).converged is True


# --- the real model -----------------------------------------------------------------------------------------------


def assessments_with(adapter: LLMAdapter) -> tuple[list[ConvergenceAssessment], Watch]:
    watch = Watch(adapter)
    llm = ModelClient(watch)
    validator = SchemaValidator()
    engine = ModelConvergence(llm, validator, DefaultSupervisor(llm, validator, ToolRegistry()))
    request = {"request": "calculate the sum of 5 and 10"}
    right = state("complete", "complete", **request)
    wrong = state("complete", "complete", answer="The capital of France is Paris.", **request)
    return [assess(engine, right), assess(engine, wrong)], watch


def check_real_assessments(assessments: list[ConvergenceAssessment]) -> None:
    for result in assessments:
        assert ConvergenceAssessment.model_validate(result.model_dump(mode="json")) == result
        assert result.completeness_score == 1.0
        assert result.converged or result.reason_codes
        judge = result.metadata["judge"]
        assert judge == "unavailable" or (isinstance(judge, dict) and judge["note"].strip())
        if judge == "unavailable":
            assert result.coherence_score is None  # not judged: not measured
        else:
            assert result.coherence_score is not None and 0.0 <= result.coherence_score <= 1.0


def test_replayed_real_model_assessments_are_valid() -> None:
    """Gemma 3 270M, recorded: valid assessments; it copies the example's judgement, which counts as none."""
    assessments, watch = assessments_with(ReplayAdapter(CASSETTE))
    assert watch.errors == []  # every request was in the cassette
    check_real_assessments(assessments)


@pytest.mark.model
def test_the_real_model_gives_valid_assessments(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from aeon_plugins.llama_cpp import LlamaCppAdapter

    target = CASSETTE if os.environ.get("AEON_RECORD_CASSETTES") == "1" else tmp_path / "convergence.jsonl"
    target.unlink(missing_ok=True)
    adapter = RecordingAdapter(LlamaCppAdapter(), target)
    try:
        assessments, watch = assessments_with(adapter)
    finally:
        adapter.close()
    assert watch.errors == []
    check_real_assessments(assessments)
