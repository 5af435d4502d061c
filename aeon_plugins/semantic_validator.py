"""The ``model`` semantic validator (spec 003): structural checks in code first, then one best-effort model call.

**Structural checks** (no model), on the steps the artifact holds — a plan's ``steps`` (also under ``plan``),
one step (``artifact_type="step"``, the artifact itself or its ``step``), and the tool calls of results
(``tool_calls`` / ``tool_history`` / ``results`` entries naming a ``tool_name``):

=====================================================  =================  ==========  =========================
finding                                                type               severity    location
=====================================================  =================  ==========  =========================
a plan with no step list (cross-phase: nor results)    consistency        CRITICAL    the artifact type
a step that is not an object                           consistency        CRITICAL    ``steps[i]``
two steps with the same ``step_id``                    consistency        CRITICAL    the step id
a step without ``step_id`` / without ``description``   consistency        HIGH        the step id or ``steps[i]``
a step or tool call naming an unregistered tool        hallucination      HIGH        the step id (or call)
a dependency on a step the plan does not have          consistency        MEDIUM      the step id
results: a number the request states that no tool      consistency        HIGH        ``request``
call used
results: a tool's review of its calls finds fault      consistency        HIGH        ``request``
=====================================================  =================  ==========  =========================

Unknown tools are only checked when a ``tool_registry`` is given. A CRITICAL structural finding decides the
report alone: the artifact is not what it claims to be, and the model is not asked.

**The request's numbers** (results only: ``execution_artifact`` and ``cross_phase`` artifacts that hold the
``request`` and at least one tool call that did not fail, to a registered tool when a ``tool_registry`` is
given): each number the request states in digits must be among the numbers of some successful tool call's
arguments (:func:`~aeon_kernel.unused_numbers`, the plan check's rule); a percentage ("20%", "20 percent") may be
used as a share (0.2) where it is written as one. One that is not was dropped: "what is 20 percent of 150, plus
7" run as ``150 * 20 / 100`` never added the 7. The finding
names the numbers and says the part of the request that uses them was not done; its repair says to add a step
that does it. The tool calls of every pass count, and so does nothing else (a step's description restates the
request as often as it does it). Numbers in words are not read, and a run with no tool call is not checked: what
a model wrote is beyond a deterministic check. When no such number is missing, each registered tool that can
review its calls (:meth:`~aeon_kernel.Tool.review`) reviews those the run made to it against the whole request:
the calculator reads numbers in words, operations and their order, so "subtract three from twenty, then multiply
by five" run as ``20 - 3`` is found out although it states no digit. :meth:`validate_structure` runs these
checks alone, without the model (the multi-pass scheduler's shallow tasks).

**Semantic judgement** (best effort): one :func:`~aeon_kernel.ask_json` call with a short prompt (one worked
example) and a bounded schema: at most 3 issues, each with a ``type`` from the five issue types, a ``severity``
of LOW, MEDIUM or HIGH (CRITICAL is kept for structure: a model's opinion alone never blocks as hard as a broken
artifact), a ``location`` from the artifact's step ids (or the artifact type), a ``description`` and a
``repair`` of at most 160 characters. The factory option ``max_model_severity`` (default ``"HIGH"``) lowers
the model's severities further, for models whose judgement should stay advisory (HIGH issues hold convergence
back and deepen the task profile). A second issue of the same type at the same place, and an issue copied word
for word from the worked example, are dropped. Any :class:`~aeon_kernel.AeonError` (model unavailable, an
answer the supervisor could not repair) leaves the report with the structural issues only: validation never
raises for the model's sake. It raises :class:`~aeon_kernel.ValidationError` only for invalid inputs (an
artifact that is not a JSON object, an unknown artifact type).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any, Final, Literal

from aeon_kernel import (
    AeonError,
    Register,
    SemanticValidationReport,
    SemanticValidator,
    Supervisor,
    ToolRegistry,
    ValidationError,
    ValidationIssue,
    Validator,
    hookimpl,
)
from aeon_kernel.kit import ModelBacked, ModelClient, RecordAction, Review, dumps_lenient, tool_reviews
from aeon_plugins.planning import facts_in, unused_numbers

#: the kernel's ``ArtifactType`` (not exported), spelled out for the type checker
Artifact = Literal["plan", "step", "execution_artifact", "cross_phase"]
ARTIFACT_TYPES: Final[dict[str, Artifact]] = {
    "plan": "plan",
    "step": "step",
    "execution_artifact": "execution_artifact",
    "cross_phase": "cross_phase",
}
ISSUE_TYPES: Final = ("specificity", "relevance", "consistency", "hallucination", "do_say_mismatch")
MODEL_SEVERITIES: Final = ("LOW", "MEDIUM", "HIGH")
MAX_MODEL_ISSUES: Final = 3
MAX_ARTIFACT_CHARS: Final = 1200
_TEXT: Final = {"type": "string", "minLength": 1, "maxLength": 160}

#: What the artifact is called in the prompt, by artifact type.
LABELS: Final = {"plan": "Plan", "step": "Step", "execution_artifact": "Results", "cross_phase": "Run"}

#: The worked example's issue. A small model copies it word for word; such a copy describes the example, not the
#: artifact, and is dropped.
EXAMPLE_DESCRIPTION: Final = "Book a flight is unrelated to the goal"

SEMANTIC_PROMPT: Final = (
    'Find problems in the artifact below. Reply as JSON with a list "issues" of at most 3 problems, or an empty '
    "list when there are none. Types: specificity (a vague step), relevance (unrelated to the goal), consistency "
    "(parts contradict each other), hallucination (a made-up tool or fact), do_say_mismatch (a step's "
    "description does not match what it does).\n"
    "Example:\n"
    'Plan: {"goal": "Multiply 6 by 7", "steps": [{"step_id": "1", "description": "Multiply 6 by 7", "tool": '
    '"calculator"}, {"step_id": "2", "description": "Book a flight", "agent": "llm"}]}\n'
    'Issues: {"issues": [{"type": "relevance", "severity": "HIGH", "location": "2", '
    f'"description": "{EXAMPLE_DESCRIPTION}", "repair": "remove step 2"}}]}}\n\n'
)


def semantic_schema(locations: list[str]) -> dict[str, Any]:
    """At most 3 issues; ``location`` restricted to ``locations`` (the step ids and the artifact type)."""
    return {
        "type": "object",
        "properties": {
            "issues": {
                "type": "array",
                "maxItems": MAX_MODEL_ISSUES,
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {"enum": list(ISSUE_TYPES)},
                        "severity": {"enum": list(MODEL_SEVERITIES)},
                        "location": {"enum": locations},
                        "description": _TEXT,
                        "repair": _TEXT,
                    },
                    "required": ["type", "severity", "location", "description", "repair"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["issues"],
        "additionalProperties": False,
    }


def semantic_prompt(artifact: dict[str, Any], artifact_type: str) -> str:
    text = dumps_lenient(artifact)
    if len(text) > MAX_ARTIFACT_CHARS:
        text = text[: MAX_ARTIFACT_CHARS - 1] + "…"
    return f"{SEMANTIC_PROMPT}{LABELS.get(artifact_type, 'Artifact')}: {text}\nIssues:"


class ModelSemanticValidator(ModelBacked, SemanticValidator):
    """Structural checks in code, then the run's model for what only judgement can find."""

    def __init__(
        self,
        llm: ModelClient,
        validator: Validator,
        supervisor: Supervisor,
        max_tokens: int = 512,
        temperature: float = 0.0,
        max_model_severity: str = "HIGH",
    ) -> None:
        if max_model_severity not in MODEL_SEVERITIES:
            raise ValidationError(
                f"max_model_severity must be one of {list(MODEL_SEVERITIES)}, got {max_model_severity!r}"
            )
        super().__init__(llm, validator, supervisor, max_tokens, temperature)
        self.max_model_severity = max_model_severity

    def validate(
        self,
        artifact: dict[str, Any],
        artifact_type: str,
        tool_registry: ToolRegistry | None = None,
        *,
        record: RecordAction | None = None,
    ) -> SemanticValidationReport:
        validation_id, issues = self._structural(artifact, artifact_type, tool_registry)
        if not any(i.severity == "CRITICAL" for i in issues):
            issues += self._judged(artifact, artifact_type, validation_id, record)
        return SemanticValidationReport.of(validation_id, ARTIFACT_TYPES[artifact_type], issues)

    def validate_structure(
        self,
        artifact: dict[str, Any],
        artifact_type: str,
        tool_registry: ToolRegistry | None = None,
    ) -> SemanticValidationReport:
        """The structural checks alone (the module docstring's table): no model call."""
        validation_id, issues = self._structural(artifact, artifact_type, tool_registry)
        return SemanticValidationReport.of(validation_id, ARTIFACT_TYPES[artifact_type], issues)

    def _structural(
        self, artifact: Any, artifact_type: Any, tool_registry: Any
    ) -> tuple[str, list[ValidationIssue]]:
        if not isinstance(artifact, dict):
            raise ValidationError(f"an artifact must be a JSON object, got {type(artifact).__name__}")
        if not isinstance(artifact_type, str) or artifact_type not in ARTIFACT_TYPES:
            raise ValidationError(
                f"artifact_type must be one of {list(ARTIFACT_TYPES)}, got {artifact_type!r}"
            )
        if tool_registry is not None and not isinstance(tool_registry, ToolRegistry):
            raise ValidationError("tool_registry must be a ToolRegistry")
        validation_id = f"sv-{uuid.uuid4().hex[:12]}"
        found = structural_findings(artifact, artifact_type, tool_registry)
        return validation_id, [_issue(f"{validation_id}-s{n}", *f) for n, f in enumerate(found, start=1)]

    def _judged(
        self, artifact: dict[str, Any], artifact_type: str, validation_id: str, record: RecordAction | None
    ) -> list[ValidationIssue]:
        """The model's issues; none when it is unavailable or its answer could not be repaired."""
        locations = [*_step_ids(artifact, artifact_type), artifact_type]
        try:
            value = self.ask(
                semantic_prompt(artifact, artifact_type), semantic_schema(locations), record=record
            )
            raw = value["issues"][:MAX_MODEL_ISSUES]
            issues = []
            seen: set[tuple[str, str]] = set()
            for n, item in enumerate(raw, start=1):
                key = (item["type"], item["location"])
                if key in seen or _same_text(item["description"], EXAMPLE_DESCRIPTION):
                    continue  # the same complaint twice about one place counts once; a copied example not at all
                seen.add(key)
                issues.append(
                    ValidationIssue.model_validate(
                        {
                            "issue_id": f"{validation_id}-m{n}",
                            "type": item["type"],
                            "severity": _capped(item["severity"], self.max_model_severity),
                            "description": item["description"].strip() or f"{item['type']} issue",
                            "location": item["location"],
                            "proposed_repair": item["repair"].strip() or None,
                        }
                    )
                )
            return issues
        except AeonError:
            return []
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
        ):  # a validator let through a value out of shape
            return []


#: type, severity, description, location, and maybe the repair it proposes
Finding = tuple[str, str, str, str | None] | tuple[str, str, str, str | None, str]


def structural_findings(
    artifact: dict[str, Any], artifact_type: str, tool_registry: ToolRegistry | None
) -> list[Finding]:
    """What is wrong with the artifact's structure, found without a model (the table in the module docstring)."""
    findings: list[Finding] = []
    steps = _steps(artifact, artifact_type)
    if steps is None:
        if artifact_type == "plan" or (artifact_type == "cross_phase" and not _has_results(artifact)):
            findings.append(
                ("consistency", "CRITICAL", f"the {artifact_type} holds no list of steps", artifact_type)
            )
        steps = []
    ids: list[str] = []
    for index, step in enumerate(steps):
        where = f"steps[{index}]"
        if not isinstance(step, dict):
            findings.append(("consistency", "CRITICAL", f"{where} is not an object", where))
            continue
        step_id = step.get("step_id")
        if not isinstance(step_id, str) or not step_id.strip():
            findings.append(("consistency", "HIGH", f"{where} has no step_id", where))
        else:
            ids.append(step_id)
            where = step_id
        description = step.get("description")
        if not isinstance(description, str) or not description.strip():
            findings.append(("consistency", "HIGH", f"step {where} has no description", where))
        tool = step.get("tool")
        if tool_registry is not None and isinstance(tool, str) and tool.strip() and tool not in tool_registry:
            findings.append(("hallucination", "HIGH", f"step {where} names an unknown tool {tool!r}", where))
    for step_id, count in sorted(Counter(ids).items()):
        if count > 1:
            findings.append(
                ("consistency", "CRITICAL", f"step id {step_id!r} is used by {count} steps", step_id)
            )
    known = set(ids)
    for step in steps:
        if isinstance(step, dict) and isinstance(step.get("dependencies"), list) and known:
            missing = [d for d in step["dependencies"] if isinstance(d, str) and d not in known]
            if missing:
                findings.append(
                    (
                        "consistency",
                        "MEDIUM",
                        f"step {step.get('step_id')} depends on unknown steps {missing}",
                        str(step.get("step_id")),
                    ),
                )
    if tool_registry is not None:
        for call in _tool_calls(artifact):
            name = call.get("tool_name")
            if isinstance(name, str) and name not in tool_registry:
                where = str(call.get("step_id") or "tool_call")
                findings.append(("hallucination", "HIGH", f"a call to the unknown tool {name!r}", where))
    if artifact_type in ("execution_artifact", "cross_phase"):
        findings += unused_request_numbers(artifact, tool_registry) or reviewed_calls(artifact, tool_registry)
    return findings


def reviewed_calls(artifact: dict[str, Any], tool_registry: ToolRegistry | None) -> list[Finding]:
    """What each tool's review finds in the successful calls the run made to it, against the whole request."""
    request = artifact.get("request")
    if not isinstance(request, str) or tool_registry is None:
        return []
    made: dict[str, list[dict[str, Any]]] = {}
    for call in _succeeded_calls(artifact, tool_registry):
        made.setdefault(call["tool_name"], []).append(call)  # its arguments, and any result
    return [
        ("consistency", "HIGH", f"{name}'s review: {' '.join(review.findings)}", "request")
        for name, review in tool_reviews(request, made, tool_registry, whole_request=True).items()
        if isinstance(review, Review) and not review.approved and not review.unrelated
    ]


def unused_request_numbers(
    artifact: dict[str, Any], tool_registry: ToolRegistry | None = None
) -> list[Finding]:
    """The request's numbers that no successful tool call used (the module docstring), as one finding."""
    request = artifact.get("request")
    calls = _succeeded_calls(artifact, tool_registry)
    if not isinstance(request, str) or not calls:
        return []
    missing = unused_numbers(request, facts_in([c["arguments"] for c in calls]))
    if not missing:
        return []
    listed = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} and {missing[-1]}"
    return [
        (
            "consistency",
            "HIGH",
            f"the request states {listed}, which no tool call used: the part of the request that uses "
            f"{'it' if len(missing) == 1 else 'them'} was not done",
            "request",
            f"add a step that does the part of the request with {listed}",
        )
    ]


def _succeeded_calls(artifact: dict[str, Any], tool_registry: ToolRegistry | None) -> list[dict[str, Any]]:
    """The tool calls that did not fail, with arguments, to a registered tool (when a registry is given)."""
    calls = [c for c in _tool_calls(artifact) if isinstance(c.get("arguments"), dict) and not c.get("error")]
    calls = [c for c in calls if isinstance(c["tool_name"], str)]
    return calls if tool_registry is None else [c for c in calls if c["tool_name"] in tool_registry]


def _steps(artifact: dict[str, Any], artifact_type: str) -> list[Any] | None:
    if artifact_type == "step":
        inner = artifact.get("step")
        return [inner if isinstance(inner, dict) else artifact]
    for holder in (artifact, artifact.get("plan"), artifact.get("plan_state")):
        if isinstance(holder, dict) and isinstance(holder.get("steps"), list):
            steps: list[Any] = holder["steps"]
            return steps
    return None


def _has_results(artifact: dict[str, Any]) -> bool:
    return any(isinstance(artifact.get(k), list) for k in ("results", "execution_results", "tool_calls"))


def _tool_calls(artifact: dict[str, Any]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for key in ("tool_calls", "tool_history", "results", "execution_results"):
        items = artifact.get(key)
        if isinstance(items, list):
            calls += [i for i in items if isinstance(i, dict) and "tool_name" in i]
    return calls


def _step_ids(artifact: dict[str, Any], artifact_type: str) -> list[str]:
    """The step ids the artifact names (its steps', then its results'), for the model's ``location``."""
    ids: list[str] = []
    results = artifact.get("results") or artifact.get("execution_results")
    for step in [*(_steps(artifact, artifact_type) or []), *(results if isinstance(results, list) else [])]:
        step_id = step.get("step_id") if isinstance(step, dict) else None
        if (
            isinstance(step_id, str)
            and step_id.strip()
            and step_id not in ids
            and step_id not in ARTIFACT_TYPES
        ):
            ids.append(step_id)
    return ids[:20]


def _capped(severity: str, ceiling: str) -> str:
    """``severity``, lowered to ``ceiling`` when above it (LOW < MEDIUM < HIGH)."""
    order = list(MODEL_SEVERITIES)
    return order[min(order.index(severity), order.index(ceiling))] if severity in order else ceiling


def _same_text(a: Any, b: Any) -> bool:
    return " ".join(str(a).lower().split()).strip(" .") == " ".join(str(b).lower().split()).strip(" .")


def _issue(
    issue_id: str,
    type_: str,
    severity: str,
    description: str,
    location: str | None,
    repair: str | None = None,
) -> ValidationIssue:
    return ValidationIssue.model_validate(
        {
            "issue_id": issue_id,
            "type": type_,
            "severity": severity,
            "description": description,
            "location": location,
            "proposed_repair": repair,
        }
    )


@hookimpl
def aeon_register_semantic_validators(register: Register) -> None:
    register("model", ModelSemanticValidator)
