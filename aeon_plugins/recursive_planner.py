"""The ``recursive`` planner (spec 003): plans like the kernel's ``model`` planner, then refines with deltas and
decomposes steps into subplans. Every model call goes through :func:`~aeon_kernel.ask_json` with a small schema.

**generate_plan** has the kernel's ``model`` planner (:class:`~aeon_kernel.ModelPlanner`) write the plan — its
prompt, its schema naming the registered tools, validation and supervisor repair — with at most
``2 + 2 * reasoning_depth`` steps (10 without a profile). Then each step gets, deterministically,
``step_index``/``total_steps``, ``dependencies`` (every earlier step: a linear plan's steps see all earlier
results), ``incoming_context`` ("the request and the results of steps 1, 2") and ``handoff_to_next`` ("hands its
result to step 3", or "its result is the answer"). Raises ``LLMError`` or ``SupervisorError`` like any planner.

**refine_plan** returns ``[]`` without asking the model when nothing calls for a change (no issues, reason codes
or blocked steps). Otherwise it asks for at most 3 actions: ``action_type`` ADD (after the target), MODIFY,
REMOVE or REPLACE; ``target`` restricted by the schema to the plan's pending or invalid steps that are not in
``executed_step_ids``, plus ``"end"`` (ADD at the end; when every step has run, ADD is the only action the
schema offers); a ``reason``; and a ``step`` (``description``, and
``uses``: a tool or ``"llm"``). The tools a new step may use are the registry's when ``tool_registry`` is given,
else only those the plan already uses (the contract passes no registry here). The answer is filtered, never
trusted: actions on executed, running or unknown steps, a second action on the same step, and actions that do
not make a valid :class:`~aeon_kernel.RefinementAction` are dropped, and so is a step copied word for word from
the worked example. Step ids are assigned in code: MODIFY keeps the target's id; ADD and REPLACE get a fresh id
(``r`` + 4 hex digits of a hash of the plan and the step), since ids are never reused in a run and the model
cannot know which were retired. Each action carries the issues
located at its target (``semantic_validation_input``) and ``inconsistency_detected`` when one of them is a
consistency or do/say mismatch, or the target is blocked. Model failure (``LLMError``, ``SupervisorError``)
gives ``[]``: refinement is best effort, and the kernel keeps the current plan. Refinement limits (3 per
fragment, 10 per run) are the kernel's to enforce, in the ledger that applies the actions.

**create_subplan** raises :class:`~aeon_kernel.NestingDepthError` when ``current_depth >= max_depth`` (the depth
of ``parent_step_id`` itself — ``"3.2"`` is at 2 — counts when it is deeper), before any model call. Else the
kernel's ``model`` planner writes a plan of at most 4 steps for the parent's description, as it writes any plan
(its prompt with the worked examples most like the description, its schema naming the tools with their
arguments, validation and supervisor repair); the subplan is that plan with
the parent's description as its goal and step ids ``f"{parent_step_id}.{n}"``, numbered and linked like a
generated plan. Its steps may use the registry's tools when ``tool_registry`` is given, else they are ``"llm"``
steps. The multi-pass scheduler asks for a part of a request this way, with what the part before it found in
the description ("multiply the result by 4, where the result is 5"). Raises ``LLMError``, ``SupervisorError``
or ``ValidationError`` like any planner when the model gives nothing usable. (A prompt of its own — "split the
step into 2 to 4 smaller steps", one worked example — was tried first: Gemma 3 270M returned the example's
steps for every step it was given, 4 times in 4; bench/README.md.)

**propose_parts** asks the model to split a request into its operations, 2 to 4 parts under a schema, with two
worked examples, for the multi-pass scheduler when its own split finds one part; the scheduler checks the parts
(:func:`~aeon_plugins.multipass.decompose.proposed_parts`). Model failure gives ``[request]``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any, Final

from aeon_kernel import (
    AeonError,
    Plan,
    PlanStep,
    RecursivePlanner,
    RefinementAction,
    Register,
    StepStatus,
    Supervisor,
    TaskProfile,
    ToolRegistry,
    ValidationError,
    ValidationIssue,
    Validator,
    hookimpl,
)
from aeon_kernel.errors import NestingDepthError
from aeon_kernel.kit import ModelBacked, ModelClient, RecordAction, canonical_json
from aeon_plugins.planning import ModelPlanner, sample_count

MAX_PLAN_STEPS: Final = 10
MAX_ACTIONS: Final = 3
MAX_SUBSTEPS: Final = 4
MAX_PROBLEMS: Final = 6
_SHORT_ID: Final = {"type": "string", "minLength": 1, "maxLength": 16}
_TEXT: Final = {"type": "string", "minLength": 1, "maxLength": 160}

# --- generate_plan ------------------------------------------------------------------------------------------------


def max_plan_steps(task_profile: Any) -> int:
    """``2 + 2 * reasoning_depth`` (4 to 12, capped at 10); 10 without a profile."""
    if isinstance(task_profile, TaskProfile):
        return min(MAX_PLAN_STEPS, 2 + 2 * task_profile.reasoning_depth)
    return MAX_PLAN_STEPS


def linked(steps: Iterable[PlanStep]) -> tuple[PlanStep, ...]:
    """``steps`` numbered (``step_index``/``total_steps``) and linked (dependencies, incoming context, handoff)."""
    steps = list(steps)
    total = len(steps)
    out = []
    for k, step in enumerate(steps, start=1):
        earlier = [s.step_id for s in steps[: k - 1]]
        incoming = (
            "the request" if not earlier else f"the request and the results of steps {', '.join(earlier)}"
        )
        handoff = f"hands its result to step {steps[k].step_id}" if k < total else "its result is the answer"
        out.append(
            step.model_copy(
                update={
                    "step_index": k,
                    "total_steps": total,
                    "dependencies": tuple(earlier),
                    "incoming_context": incoming,
                    "handoff_to_next": handoff,
                }
            )
        )
    return tuple(out)


# --- refine_plan --------------------------------------------------------------------------------------------------

#: The worked example's new step. A small model copies it word for word; a copied step belongs to the example's
#: plan, not this one, and is dropped.
EXAMPLE_REFINED_STEP: Final = "Report the product of 6 and 7"

REFINE_PROMPT: Final = (
    'Fix the plan\'s problems. Reply as JSON with a list "actions" (at most 3). Each action has an '
    '"action_type": ADD (a new step after the target), MODIFY (rewrite the target), REMOVE or REPLACE; a '
    '"target": a pending step id, or "end" to ADD at the end; a "reason"; and a "step" with a "description" '
    'and "uses" (a tool or "llm").\n'
    "Example:\n"
    "Goal: Multiply 6 by 7\nPlan:\n1 [complete] Multiply 6 by 7 (calculator)\n2 [pending] Do something (llm)\n"
    'Problems:\n2: specificity: "Do something" is vague\n'
    'Actions: {"actions": [{"action_type": "MODIFY", "target": "2", "reason": "say what to report", '
    f'"step": {{"description": "{EXAMPLE_REFINED_STEP}", "uses": "llm"}}}}]}}\n\n'
)


def step_schema(uses: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"description": _TEXT, "uses": {"enum": uses}},
        "required": ["description", "uses"],
        "additionalProperties": False,
    }


def refine_schema(targets: list[str], uses: list[str]) -> dict[str, Any]:
    """At most 3 actions on ``targets``; only ADD when ``"end"`` is the only target (every step has run)."""
    kinds = ["ADD"] if targets == ["end"] else ["ADD", "MODIFY", "REMOVE", "REPLACE"]
    return {
        "type": "object",
        "properties": {
            "actions": {
                "type": "array",
                "maxItems": MAX_ACTIONS,
                "items": {
                    "type": "object",
                    "properties": {
                        "action_type": {"enum": kinds},
                        "target": {"enum": targets},
                        "reason": {"type": "string", "minLength": 1, "maxLength": 120},
                        "step": step_schema(uses),
                    },
                    "required": ["action_type", "target", "reason", "step"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["actions"],
        "additionalProperties": False,
    }


#: propose_parts: the worked examples are the plan examples' own chained requests (none from a measured set)
PARTS_PROMPT: Final = (
    "Split the request into the operations it asks for, in order, one part per operation. A part that works on "
    'the result of the part before says "the result". Keep each number as the request writes it.\n'
    'Request: what is nine minus four, then doubled?\nParts: {"parts": ["what is nine minus four", '
    '"double the result"]}\n'
    'Request: add 6 and 9, then divide the result by 5\nParts: {"parts": ["add 6 and 9", '
    '"divide the result by 5"]}\n'
)
PARTS_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "parts": {"type": "array", "items": _TEXT, "minItems": 2, "maxItems": MAX_SUBSTEPS},
    },
    "required": ["parts"],
    "additionalProperties": False,
}


def _uses(step: PlanStep) -> str:
    return step.tool or "llm"


def refine_prompt(
    plan: Plan, issues: list[ValidationIssue], reason_codes: list[str], blocked_steps: list[str]
) -> str:
    steps = "\n".join(
        f"{s.step_id} [{s.status.value}] {s.description[:120]} ({_uses(s)})" for s in plan.steps
    )
    problems = [f"{i.location or 'plan'}: {i.type}: {i.description[:120]}" for i in issues]
    why = {s.step_id: f": {s.failure[:120]}" for s in plan.steps if s.failure}  # what blocked it, to fix
    problems += [f"{step_id}: the step is blocked{why.get(step_id, '')}" for step_id in blocked_steps]
    problems += [f"plan: {code}" for code in reason_codes]
    shown = "\n".join(problems[:MAX_PROBLEMS])
    return f"{REFINE_PROMPT}Goal: {plan.goal[:200]}\nPlan:\n{steps}\nProblems:\n{shown}\nActions:"


def fresh_id(plan: Plan, seed: str, taken: set[str]) -> str:
    """An id no step of ``plan`` (nor ``taken``) has: ``r`` + 4 hex digits of a hash of the plan and ``seed``."""
    base = canonical_json([s.step_id for s in plan.steps]) + "|" + seed
    for salt in range(1000):
        candidate = "r" + hashlib.sha256(f"{base}|{salt}".encode()).hexdigest()[:4]
        if candidate not in taken:
            return candidate
    raise ValidationError("no fresh step id found")  # unreachable in practice: 1000 hash collisions


def new_step(step_id: str, description: str, uses: str) -> PlanStep:
    if uses == "llm":
        return PlanStep(step_id=step_id, description=description, agent="llm")
    return PlanStep(step_id=step_id, description=description, tool=uses)


def _same_text(a: Any, b: Any) -> bool:
    return " ".join(str(a).lower().split()).strip(" .") == " ".join(str(b).lower().split()).strip(" .")


# --- the planner --------------------------------------------------------------------------------------------------

_REFINABLE: Final = (StepStatus.PENDING, StepStatus.INVALID)


class ModelRecursivePlanner(ModelBacked, RecursivePlanner):
    """Plans, refines and decomposes with the run's model; everything it returns is checked in code first."""

    def __init__(
        self,
        llm: ModelClient,
        validator: Validator,
        supervisor: Supervisor,
        max_tokens: int = 512,
        temperature: float = 0.0,
        samples: int = 0,
    ) -> None:
        super().__init__(llm, validator, supervisor, max_tokens, temperature)
        #: the ``model`` planner's ``samples``, for the run's plan (not for subplans)
        self.samples = sample_count(samples)

    def _writer(self, max_steps: int, samples: int = 0) -> ModelPlanner:
        """The kernel's planner on this one's model and settings, writing at most ``max_steps`` steps."""
        return ModelPlanner(
            self.llm,
            self.validator,
            self.supervisor,
            self.max_tokens,
            self.temperature,
            max_steps=max_steps,
            samples=samples,
        )

    def answer_problem(
        self, answer: Any, request: str, steps: Sequence[PlanStep], *, final: bool
    ) -> str | None:
        """The ``model`` planner's check of an answer to a step (this planner writes its plans through it)."""
        return self._writer(MAX_SUBSTEPS).answer_problem(answer, request, steps, final=final)

    def generate_plan(
        self,
        task_description: str,
        task_profile: Any,
        tool_registry: ToolRegistry,
        *,
        record: RecordAction | None = None,
    ) -> Plan:
        if not isinstance(task_description, str) or not task_description.strip():
            raise ValidationError("task_description must be a non-empty string")
        # The kernel's planner writes it (its prompt, its schema, validation and repair), sized by the profile.
        writer = self._writer(max_plan_steps(task_profile), self.samples)
        plan = writer.generate_plan(task_description, task_profile, tool_registry, record=record)
        return plan.model_copy(update={"steps": linked(plan.steps)})

    def propose_parts(self, request: str, *, record: RecordAction | None = None) -> list[str]:
        """The model's split of ``request``, one part per operation, as it wrote it (the scheduler checks it);
        ``[request]`` when the model gives none: like refinement, a split is best effort."""
        try:
            value = self.ask(f"{PARTS_PROMPT}Request: {request}\nParts:", PARTS_SCHEMA, record=record)
            return [str(part) for part in value["parts"]]
        except (AeonError, KeyError, TypeError):
            return [request]

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
        if not isinstance(current_plan, Plan):
            raise ValidationError(f"current_plan must be a Plan, got {type(current_plan).__name__}")
        if not isinstance(executed_step_ids, (set, frozenset, list, tuple)):
            raise ValidationError("executed_step_ids must be a set of step ids")
        issues = [i for i in validation_issues or [] if isinstance(i, ValidationIssue)]
        codes = [str(c) for c in convergence_reason_codes or []]
        blocked = [str(s) for s in blocked_steps or []]
        if not (issues or codes or blocked):
            return []
        executed = {str(s) for s in executed_step_ids}
        open_ids = [
            s.step_id for s in current_plan.steps if s.status in _REFINABLE and s.step_id not in executed
        ]
        if tool_registry is not None:
            uses = [*tool_registry.list_all(), "llm"]
        else:
            uses = [*sorted({s.tool for s in current_plan.steps if s.tool}), "llm"]
        try:
            value = self.ask(
                refine_prompt(current_plan, issues, codes, blocked),
                refine_schema([*open_ids, "end"], uses),
                record=record,
            )
            proposed = list(value["actions"])[:MAX_ACTIONS]
        except (AeonError, KeyError, TypeError):
            return []
        return self._actions(current_plan, proposed, open_ids, executed, issues, blocked, uses)

    def _actions(
        self,
        plan: Plan,
        proposed: list[Any],
        open_ids: list[str],
        executed: set[str],
        issues: list[ValidationIssue],
        blocked: list[str],
        uses: list[str],
    ) -> list[RefinementAction]:
        """The model's proposals that are safe to hand to the kernel; the rest are dropped."""
        actions: list[RefinementAction] = []
        touched: set[str] = set()
        taken = {s.step_id for s in plan.steps}
        for n, item in enumerate(proposed):
            try:
                kind, target = item["action_type"], item["target"]
                step = item.get("step") or {}
                description, tool = str(step.get("description", "")).strip(), str(step.get("uses"))
                if target in executed or (target != "end" and target not in open_ids):
                    continue
                if (target == "end" and kind != "ADD") or target in touched:
                    continue
                if kind != "REMOVE" and (
                    not description or tool not in uses or _same_text(description, EXAMPLE_REFINED_STEP)
                ):
                    continue
                replacement = None
                if kind == "MODIFY":
                    replacement = new_step(target, description, tool)
                elif kind in ("ADD", "REPLACE"):
                    step_id = fresh_id(plan, f"{n}|{kind}|{target}|{description}", taken)
                    taken.add(step_id)
                    replacement = new_step(step_id, description, tool)
                related = tuple(i for i in issues if i.location == target)
                action = RefinementAction(
                    action_type=kind,
                    target_step_id=None if target == "end" else target,
                    target_plan_section="end" if target == "end" else None,
                    new_step=replacement,
                    reason=str(item.get("reason", "")).strip() or f"{kind} {target}",
                    semantic_validation_input=related,
                    inconsistency_detected=target in blocked
                    or any(i.type in ("consistency", "do_say_mismatch") for i in related),
                )
            except (
                KeyError,
                TypeError,
                ValueError,
                AttributeError,
            ):  # pydantic's ValidationError is a ValueError
                continue
            if target != "end":
                touched.add(target)
            actions.append(action)
        return actions

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
        if not isinstance(parent_step_id, str) or not parent_step_id.strip():
            raise ValidationError("parent_step_id must be a non-empty string")
        if not isinstance(parent_step_description, str) or not parent_step_description.strip():
            raise ValidationError("parent_step_description must be a non-empty string")
        if isinstance(current_depth, bool) or not isinstance(current_depth, int) or current_depth < 0:
            raise ValidationError(f"current_depth must be an integer >= 0, got {current_depth!r}")
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
            raise ValidationError(f"max_depth must be an integer >= 1, got {max_depth!r}")
        depth = max(current_depth, parent_step_id.count(".") + 1)
        if depth >= max_depth:
            raise NestingDepthError(
                f"step {parent_step_id!r} is at depth {depth}: a subplan would nest deeper than {max_depth}",
                depth=depth + 1,
                max_depth=max_depth,
            )
        plan = self._writer(MAX_SUBSTEPS).generate_plan(
            parent_step_description,
            None,
            tool_registry if tool_registry is not None else ToolRegistry(),
            record=record,
        )
        steps = [
            step.model_copy(update={"step_id": f"{parent_step_id}.{n}"})
            for n, step in enumerate(plan.steps, start=1)
        ]
        return Plan(goal=parent_step_description, steps=linked(steps))


@hookimpl
def aeon_register_planners(register: Register) -> None:
    register("recursive", ModelRecursivePlanner)
