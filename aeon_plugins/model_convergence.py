"""The ``model`` convergence engine (spec 003): deterministic completeness first, then the model judges the answer.

**Deterministic part** (no model): ``completeness_score`` is the share of the plan's steps that are complete;
an unfinished plan is not converged (``steps_unfinished``), and each failed step is named
(``step_failed:<id>``), as the ``plan_finished`` engine does. HIGH and CRITICAL issues of the semantic
validation report go to ``detected_issues`` and make the run not converged (``semantic_issues``).

**Judgement** (one :func:`~aeon_kernel.ask_json` call, only once the plan is finished and some step completed:
before that there is no answer to judge): the model scores the answer against the request, ``coherence`` and
``consistency`` each as an integer 0..10 (an enumeration, so a constrained decoder cannot leave the range),
divided by 10, with a ``note`` of at most 120 characters. The request is ``plan_state["request"]`` when the
caller gives it, else the plan's goal; the answer is the last complete step's result, shown after the results of
the complete steps before it.

**Verdict**: converged when the plan is finished, no semantic issue blocks, and every criterion meets its
threshold — completeness ≥ 0.95, coherence ≥ 0.90, consistency ≥ 0.90 by default; the factory options and then
``custom_criteria`` (``completeness_threshold``, ``coherence_threshold``, ``consistency_threshold``, numbers in
[0, 1]) override them. Each failed criterion adds its reason code (``completeness_below_threshold``,
``coherence_below_threshold``, ``consistency_below_threshold``), so conflicting criteria (complete but incoherent)
say exactly which failed.

**When the judge fails** (model unavailable, an answer the supervisor could not repair, or a judgement copied word
for word from the worked example, which judged the example and not this answer): the deterministic verdict stands
alone — the coherence and consistency thresholds are not applied, ``coherence_score`` is None (not judged),
``metadata["judge"]`` is ``"unavailable"`` with the error in ``metadata["judge_error"]``, ``detected_issues``
says so, and ``judge_unavailable`` is added to the reason codes only when the verdict is not converged anyway: it
never turns a deterministic convergence into a failure (a run whose steps all completed is not held back because
its judge could not speak). ``assess`` raises only :class:`~aeon_kernel.ValidationError`, for invalid inputs.
"""

from __future__ import annotations

from typing import Any, Final

from aeon_kernel import (
    AeonError,
    ConvergenceAssessment,
    ConvergenceEngine,
    Register,
    SemanticValidationReport,
    Supervisor,
    ValidationError,
    Validator,
    hookimpl,
)
from aeon_kernel.kit import ModelBacked, ModelClient, RecordAction, dumps_lenient, plan_progress

DEFAULT_THRESHOLDS: Final = {
    "completeness_threshold": 0.95,
    "coherence_threshold": 0.90,
    "consistency_threshold": 0.90,
}
BLOCKING_SEVERITIES: Final = ("HIGH", "CRITICAL")
MAX_RESULT_CHARS: Final = 200
MAX_RESULTS: Final = 6

JUDGE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "coherence": {"enum": list(range(11))},
        "consistency": {"enum": list(range(11))},
        "note": {"type": "string", "minLength": 1, "maxLength": 120},
    },
    "required": ["coherence", "consistency", "note"],
    "additionalProperties": False,
}

#: The worked example's note. A small model copies the example word for word, scores and all; a judgement whose
#: note is the example's judged the example, not this answer, and counts as no judgement.
EXAMPLE_NOTE: Final = "the answer states the product the step computed"

JUDGE_PROMPT: Final = (
    "Judge the answer to the request as JSON. coherence: 0 (does not answer the request) to 10 (answers it "
    "clearly). consistency: 0 (the answer contradicts the step results) to 10 (it agrees with them). note: one "
    "short sentence.\n"
    "Example:\n"
    "Request: what is 6 times 7?\n"
    'Step 1 result: {"expression": "6 * 7", "value": 42}\n'
    "Answer: 6 times 7 is 42.\n"
    f'Judgement: {{"coherence": 10, "consistency": 10, "note": "{EXAMPLE_NOTE}"}}\n\n'
)


def _cut(value: Any, limit: int = MAX_RESULT_CHARS) -> str:
    text = value if isinstance(value, str) else dumps_lenient(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def judge_prompt(request: str, results: list[tuple[str, Any]]) -> str:
    """The request, the results of the steps before the last (at most 6), and the last one's as the answer."""
    *earlier, (_, answer) = results
    lines = [JUDGE_PROMPT, f"Request: {_cut(request, 400)}\n"]
    lines += [f"Step {step_id} result: {_cut(result)}\n" for step_id, result in earlier[-MAX_RESULTS:]]
    lines.append(f"Answer: {_cut(answer, 400)}\nJudgement:")
    return "".join(lines)


def thresholds(options: dict[str, Any], custom_criteria: dict[str, Any] | None) -> dict[str, float]:
    """The defaults, overridden by the factory's options and then by ``custom_criteria`` (checked: [0, 1])."""
    chosen = dict(DEFAULT_THRESHOLDS)
    for source in (options, custom_criteria or {}):
        for key in DEFAULT_THRESHOLDS:
            if key in source and source[key] is not None:
                value = source[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                    raise ValidationError(f"{key} must be a number in [0, 1], got {value!r}")
                chosen[key] = float(value)
    return chosen


class ModelConvergence(ModelBacked, ConvergenceEngine):
    """Completeness in code, coherence and consistency by the run's model, against thresholds."""

    def __init__(
        self,
        llm: ModelClient,
        validator: Validator,
        supervisor: Supervisor,
        max_tokens: int = 512,
        temperature: float = 0.0,
        completeness_threshold: float | None = None,
        coherence_threshold: float | None = None,
        consistency_threshold: float | None = None,
    ) -> None:
        super().__init__(llm, validator, supervisor, max_tokens, temperature)
        self.options = {
            "completeness_threshold": completeness_threshold,
            "coherence_threshold": coherence_threshold,
            "consistency_threshold": consistency_threshold,
        }
        thresholds(
            self.options, None
        )  # a bad option is a configuration error, found when the engine is built

    def assess(
        self,
        plan_state: dict[str, Any],
        execution_results: list[dict[str, Any]],
        semantic_validation_report: Any = None,
        custom_criteria: dict[str, Any] | None = None,
        *,
        record: RecordAction | None = None,
    ) -> ConvergenceAssessment:
        if not isinstance(plan_state, dict):
            raise ValidationError(f"plan_state must be a JSON object, got {type(plan_state).__name__}")
        if not isinstance(execution_results, list):
            raise ValidationError("execution_results must be a list of JSON objects")
        if custom_criteria is not None and not isinstance(custom_criteria, dict):
            raise ValidationError("custom_criteria must be a JSON object")
        report = _report(semantic_validation_report)
        limits = thresholds(self.options, custom_criteria)

        steps = [s for s in plan_state.get("steps") or [] if isinstance(s, dict)]
        finished, completeness, reasons = plan_progress(plan_state)
        blocking = [i for i in (report.issues if report else ()) if i.severity in BLOCKING_SEVERITIES]
        detected = [f"{i.severity} {i.type} at {i.location or '-'}: {i.description}" for i in blocking]
        if blocking:
            reasons.append("semantic_issues")
        if completeness < limits["completeness_threshold"]:
            reasons.append("completeness_below_threshold")

        metadata: dict[str, Any] = {"thresholds": limits}
        coherence = consistency = None
        results = _results(steps, execution_results)
        if finished and results and (custom_criteria or {}).get("shallow"):
            metadata["judge"] = "skipped: a shallow task (structural checks only)"
        elif finished and results:
            request = plan_state.get("request") or plan_state.get("goal") or ""
            try:
                value = self.ask(judge_prompt(str(request), results), JUDGE_SCHEMA, record=record)
                if _same_text(value["note"], EXAMPLE_NOTE):
                    raise ValidationError(
                        "the judge repeated the worked example instead of judging the answer"
                    )
                coherence, consistency = int(value["coherence"]) / 10, int(value["consistency"]) / 10
                metadata["judge"] = {"note": str(value["note"])}
            except (AeonError, ValueError, TypeError, KeyError) as exc:
                metadata["judge"] = "unavailable"
                metadata["judge_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        else:
            metadata["judge"] = (
                "skipped: no steps"
                if not steps
                else "skipped: the plan is unfinished"
                if not finished
                else "skipped: no step completed"
            )

        if coherence is not None and coherence < limits["coherence_threshold"]:
            reasons.append("coherence_below_threshold")
        if consistency is not None and consistency < limits["consistency_threshold"]:
            reasons.append("consistency_below_threshold")
        failed = [r for r in reasons if not r.startswith("step_failed:")]
        converged = not failed
        if metadata["judge"] == "unavailable":
            detected.append("judge_unavailable: coherence and consistency were not judged")
            if not converged:
                reasons.append("judge_unavailable")
        return ConvergenceAssessment(
            converged=converged,
            reason_codes=tuple(reasons),
            completeness_score=completeness,
            coherence_score=coherence,
            consistency_status={
                "plan_steps": "finished" if finished else "unfinished",
                "failed_steps": [s.get("step_id") for s in steps if s.get("status") == "failed"],
                "answer": "judged" if consistency is not None else "not judged",
                "score": consistency,
                "threshold": limits["consistency_threshold"],
                "consistent": None if consistency is None else consistency >= limits["consistency_threshold"],
                "semantic_issues": len(blocking),
                "memory": "not checked",
            },
            detected_issues=tuple(detected),
            metadata=metadata,
        )


def _same_text(a: Any, b: Any) -> bool:
    return " ".join(str(a).lower().split()).strip(" .") == " ".join(str(b).lower().split()).strip(" .")


def _report(value: Any) -> SemanticValidationReport | None:
    if value is None or isinstance(value, SemanticValidationReport):
        return value
    if isinstance(value, dict):
        try:
            return SemanticValidationReport.model_validate(value)
        except ValueError as exc:
            raise ValidationError(f"semantic_validation_report is not a valid report: {exc}") from None
    raise ValidationError(
        f"semantic_validation_report must be a SemanticValidationReport, got {type(value).__name__}"
    )


def _results(steps: list[dict[str, Any]], execution_results: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """``(step id, result)`` of every complete step, in plan order (from the results list when it says more)."""
    given = {
        r.get("step_id"): r.get("result")
        for r in execution_results
        if isinstance(r, dict) and r.get("status", "complete") == "complete"
    }
    pairs = []
    for step in steps:
        if step.get("status") == "complete":
            result = step.get("result")
            if result is None:
                result = given.get(step.get("step_id"))
            pairs.append((str(step.get("step_id")), result))
    return pairs


@hookimpl
def aeon_register_convergence_engines(register: Register) -> None:
    register("model", ModelConvergence)
