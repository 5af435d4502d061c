"""The ``model`` adaptive-depth heuristic (spec 003, phases A and D): the model profiles the task, a formula sets
its TTL, and fixed rules deepen (or lighten) the profile at pass boundaries.

**Inference** (phase A) is one :func:`~aeon_kernel.ask_json` call: a short prompt with one worked example and a
small schema whose every field is an enumeration (``reasoning_depth`` 1 to 5, ``information`` 0 to 10, the three
categorical dimensions) plus a ``why`` of at most 160 characters, so a constrained decoder cannot write anything
out of range. ``information`` is turned into ``information_sufficiency`` by dividing by 10. Any
:class:`~aeon_kernel.AeonError` on the way (model unavailable, an answer the supervisor could not repair) gives
:meth:`TaskProfile.default <aeon_kernel.TaskProfile.default>` with the reason in ``raw_inference``: inference
never fails a run. The worked example is a middling task, and an answer that repeats it word for word (small
models do) is no inference: it gives the default profile too, saying why.

**TTL** is the kernel's :func:`~aeon_kernel.allocate_ttl` (deterministic, documented there).

**Update** (phase D) is deterministic, no model call. With ``d`` the current ``reasoning_depth``:

1. *deeper* when the pass showed the task is harder than profiled — the assessment has not converged and its
   completeness is below 0.5, or the report holds a HIGH or CRITICAL issue, or any step reported BLOCKED:
   ``reasoning_depth = min(5, d + 1)``; a BLOCKED step also lowers ``information_sufficiency`` by 0.25 (not
   below 0), since the request lacked something a step needed;
2. *shallower* when the task was easier — the assessment converged on the first pass (its
   ``metadata["pass_number"]`` is at most 1; without one, the profile is still version 1) and ``d >= 4``:
   ``reasoning_depth = d - 1``;
3. otherwise, or when rule 1 or 2 would change nothing (already at depth 5 with nothing else to lower), None.

Rule 1 is checked before rule 2. The new profile is ``current.updated(...)`` (``profile_version`` + 1) and its
``raw_inference`` says which rule fired and why, followed by the previous reasoning.
"""

from __future__ import annotations

import json
from typing import Any, Final

from aeon_kernel import (
    AdaptiveDepth,
    AeonError,
    ConvergenceAssessment,
    Register,
    SemanticValidationReport,
    TaskProfile,
    ValidationError,
    hookimpl,
)
from aeon_kernel.kit import ClarityState, ModelBacked, RecordAction, dumps_lenient
from aeon_plugins.multipass import allocate_ttl

MAX_DEPTH: Final = 5
#: completeness below this, without convergence, means the task was under-profiled
LOW_COMPLETENESS: Final = 0.5
#: a depth at least this, converged on the first pass, means the task was over-profiled
HIGH_DEPTH: Final = 4
#: how much a BLOCKED step lowers information_sufficiency
BLOCKED_SUFFICIENCY_DROP: Final = 0.25
MAX_CONTEXT_CHARS: Final = 300

PROFILE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "reasoning_depth": {"enum": [1, 2, 3, 4, 5]},
        "information": {"enum": list(range(11))},
        "expected_tool_usage": {"enum": ["none", "minimal", "moderate", "extensive"]},
        "output_breadth": {"enum": ["narrow", "moderate", "broad"]},
        "confidence_requirement": {"enum": ["low", "medium", "high"]},
        "why": {"type": "string", "minLength": 1, "maxLength": 160},
    },
    "required": [
        "reasoning_depth",
        "information",
        "expected_tool_usage",
        "output_breadth",
        "confidence_requirement",
        "why",
    ],
    "additionalProperties": False,
}

#: A middling task on purpose: a model too small to profile copies the example, and a copy then gives a profile
#: close to the default rather than an extreme one. A verbatim copy is detected and replaced by the default.
EXAMPLE_REQUEST: Final = "compare the populations of France and Spain"
EXAMPLE_ANSWER: Final[dict[str, Any]] = {
    "reasoning_depth": 3,
    "information": 6,
    "expected_tool_usage": "moderate",
    "output_breadth": "moderate",
    "confidence_requirement": "medium",
    "why": "look up two numbers and compare them",
}

PROFILE_PROMPT: Final = (
    "Profile the request as JSON.\n"
    "reasoning_depth: 1 (one simple step) to 5 (long careful reasoning).\n"
    "information: 0 (the request gives nothing needed) to 10 (it gives everything needed).\n"
    "expected_tool_usage: none, minimal, moderate or extensive.\n"
    "output_breadth: narrow, moderate or broad.\n"
    "confidence_requirement: low, medium or high.\n"
    "why: one short sentence.\n"
    f"Example:\nRequest: {EXAMPLE_REQUEST}\nProfile: {json.dumps(EXAMPLE_ANSWER)}\n\n"
)


def profile_prompt(task_description: str, context: dict[str, Any] | None = None) -> str:
    """The fixed part first (instructions, example), then the optional context and the request."""
    lines = [PROFILE_PROMPT]
    if context:
        text = dumps_lenient(context)
        if len(text) > MAX_CONTEXT_CHARS:
            text = text[: MAX_CONTEXT_CHARS - 1] + "…"
        lines.append(f"Context: {text}\n")
    lines.append(f"Request: {task_description}\nProfile:")
    return "".join(lines)


def profile_from_answer(value: dict[str, Any], task_description: str = "") -> TaskProfile:
    """The TaskProfile a schema-valid answer describes; raw_inference keeps the model's reason and its ratings.

    An answer that repeats the worked example word for word (and the request is not the example's) is no
    inference at all: it gives the default profile, saying so. A ``why`` copied from the example is not kept.
    """
    copied_why = _same_text(value["why"], EXAMPLE_ANSWER["why"])
    if value == EXAMPLE_ANSWER and not _same_text(task_description, EXAMPLE_REQUEST):
        return TaskProfile.default("the model repeated the worked example instead of profiling the request")
    why = "(no reason of its own)" if copied_why else str(value["why"]).strip()
    return TaskProfile(
        reasoning_depth=int(value["reasoning_depth"]),
        information_sufficiency=int(value["information"]) / 10,
        expected_tool_usage=value["expected_tool_usage"],
        output_breadth=value["output_breadth"],
        confidence_requirement=value["confidence_requirement"],
        raw_inference=(
            f"model: {why or '(no reason given)'} (depth {value['reasoning_depth']}/5, information "
            f"{value['information']}/10, tools {value['expected_tool_usage']}, breadth {value['output_breadth']}, "
            f"confidence {value['confidence_requirement']})"
        ),
    )


def _same_text(a: Any, b: Any) -> bool:
    return " ".join(str(a).lower().split()).strip(" .") == " ".join(str(b).lower().split()).strip(" .")


class ModelAdaptiveDepth(ModelBacked, AdaptiveDepth):
    """Profiles a task with the run's model; allocates TTL and updates the profile by fixed rules."""

    def infer_task_profile(
        self,
        task_description: str,
        context: dict[str, Any] | None = None,
        *,
        record: RecordAction | None = None,
    ) -> TaskProfile:
        if not isinstance(task_description, str) or not task_description.strip():
            raise ValidationError("task_description must be a non-empty string")
        try:
            value = self.ask(profile_prompt(task_description, context), PROFILE_SCHEMA, record=record)
            return profile_from_answer(value, task_description)
        except AeonError as exc:
            return TaskProfile.default(f"inference failed: {type(exc).__name__}: {str(exc)[:200]}")
        except (
            ValueError,
            TypeError,
            KeyError,
        ) as exc:  # a validator plugin let through a value out of shape
            return TaskProfile.default(f"inference gave an unusable profile: {str(exc)[:200]}")

    def allocate_ttl(self, task_profile: TaskProfile, global_ttl_limit: int | None = None) -> int:
        return allocate_ttl(task_profile, global_ttl_limit)

    def update_task_profile(
        self,
        current_profile: TaskProfile,
        convergence_assessment: ConvergenceAssessment,
        semantic_validation_report: SemanticValidationReport,
        clarity_states: list[ClarityState],
        *,
        record: RecordAction | None = None,
    ) -> TaskProfile | None:
        return updated_profile(
            current_profile, convergence_assessment, semantic_validation_report, clarity_states
        )


def updated_profile(
    current: TaskProfile,
    assessment: ConvergenceAssessment,
    report: SemanticValidationReport | None,
    clarity_states: list[ClarityState],
) -> TaskProfile | None:
    """The module docstring's rules, as a pure function."""
    depth = current.reasoning_depth
    harder: list[str] = []
    if not assessment.converged and assessment.completeness_score < LOW_COMPLETENESS:
        harder.append(
            f"not converged with completeness {assessment.completeness_score:.2f} < {LOW_COMPLETENESS}"
        )
    serious = [i for i in (report.issues if report else ()) if i.severity in ("HIGH", "CRITICAL")]
    if serious:
        harder.append(
            f"{len(serious)} HIGH/CRITICAL issue(s): {', '.join(sorted({i.type for i in serious}))}"
        )
    blocked = clarity_states.count("BLOCKED")
    if blocked:
        harder.append(f"{blocked} step(s) BLOCKED")
    if harder:
        changes: dict[str, Any] = {}
        if depth < MAX_DEPTH:
            changes["reasoning_depth"] = depth + 1
        if blocked and current.information_sufficiency > 0:
            changes["information_sufficiency"] = round(
                max(0.0, current.information_sufficiency - BLOCKED_SUFFICIENCY_DROP), 4
            )
        if not changes:
            return None
        what = ", ".join(f"{k} {getattr(current, k)} -> {v}" for k, v in changes.items())
        return current.updated(
            **changes,
            raw_inference=f"update (deeper): {'; '.join(harder)}; {what}. Before: {_short(current.raw_inference)}",
        )
    first_pass = _pass_number(assessment, current) <= 1
    if assessment.converged and first_pass and depth >= HIGH_DEPTH:
        return current.updated(
            reasoning_depth=depth - 1,
            raw_inference=(
                f"update (shallower): converged on the first pass at depth {depth}; reasoning_depth {depth} -> "
                f"{depth - 1}. Before: {_short(current.raw_inference)}"
            ),
        )
    return None


def _short(text: str, limit: int = 240) -> str:
    """Earlier reasoning, kept short: a profile updated several times does not grow without bound."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _pass_number(assessment: ConvergenceAssessment, current: TaskProfile) -> int:
    number = assessment.metadata.get("pass_number")
    if isinstance(number, int) and not isinstance(number, bool):
        return number
    return 1 if current.profile_version == 1 else 2


@hookimpl
def aeon_register_depth_heuristics(register: Register) -> None:
    register("model", ModelAdaptiveDepth)
