"""The kernel's planner, ``model``: the model writes the plan (FR-006/010), and nothing it writes is used unchecked.

The plan is asked for with decoding constrained to the plan schema (naming the registered tools), then read by
:func:`~aeon_plugins.planning.parse.parse_plan`: parsed, validated and, when malformed, repaired by the supervisor,
whose repair may not add a tool (FR-032). A planner plugin (spec 003's RecursivePlanner) replaces this one by
name: ``[planner] use = "..."``.

A valid plan is then checked against the request (:func:`~aeon_plugins.planning.grounding.plan_problems`): a plan that
leaves out a number the request states, uses one of them more often than the request does, or gives a tool a
worked example's text was not written for this request. The planner then asks again, the same prompt with
the plan's ``goal`` fixed to the request itself by the schema, and keeps the second plan only if it passes the
check. Greedy decoding often writes the same plan again, so when it does not pass, the planner asks with the
worked examples varied (the nearest left out, then the second nearest: :data:`OTHER_EXAMPLES`) and keeps the
first plan that passes; the attempts are recorded as one ``plan_repair`` whose original carries the check's
findings as ``errors``.
Only a model whose decoding the schema constrains is asked again (to any other the second request would be the
first one over again), and only for a request short enough to be a goal. (Sending the plan to the supervisor's
repair prompt, or adding the findings to the plan prompt, was measured first: the 270M model wrote the same plan
back, or a worse one; bench/README.md.) Each tool the plan calls also reviews the calls proposed to it
(``Tool.review``), and its findings count as the check's; a plan still flagged after the second request has its
calls to a tool the request asks nothing of left out, and is recorded as an ``inconclusive``
``plan_fits_request`` check (decision 0018). The planner also judges the model's answers to its steps
(:meth:`ModelPlanner.answer_problem`, the grounding check). ``[planner] check = false`` turns both checks off.
``[planner] samples = N`` (off by default) compares the plan's result with N more plans written from other
worked examples (:mod:`~aeon_plugins.planning.agreement`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from aeon_kernel import Plan, Planner, PlanStep, Supervisor, SupervisorAction, ToolRegistry, Validator
from aeon_kernel.errors import ConfigError, SupervisorError, ValidationError
from aeon_kernel.kit import (
    Check,
    CheckVerdict,
    ModelBacked,
    ModelClient,
    RecordAction,
    Review,
    ignore_action,
    tool_reviews,
)
from aeon_plugins.planning.agreement import Outcome, agreement, outcome
from aeon_plugins.planning.examples import EXAMPLES_SHOWN
from aeon_plugins.planning.grounding import grounding_problem, plan_problems
from aeon_plugins.planning.parse import parse_plan
from aeon_plugins.planning.prompts import MAX_PLAN_STEPS, SYSTEM_PROMPT, plan_prompt, plan_schema

#: A longer request is not asked for again: the model would have to write it out as the goal.
MAX_GOAL_CHARS: Final = 200
#: When the plan asked for again fails the check too, the ranks of the worked examples left out for each further
#: attempt (the nearest, then the second nearest): the 270M model copies the nearest one, so another set of
#: examples is what changes its plan (stop 46: "7 * 9" for "multiply the quotient by 7, where the result is 9",
#: after "7 * 7" twice)
OTHER_EXAMPLES: Final = (0, 1)


class ModelPlanner(ModelBacked, Planner):
    """Plans with the run's model, constrained to the plan schema; repairs through the supervisor; asks again
    when the plan does not fit the request (``check``)."""

    def __init__(
        self,
        llm: ModelClient,
        validator: Validator,
        supervisor: Supervisor,
        max_tokens: int = 512,
        temperature: float = 0.0,
        max_steps: int = MAX_PLAN_STEPS,
        check: bool = True,
        samples: int = 0,
    ) -> None:
        super().__init__(llm, validator, supervisor, max_tokens, temperature)
        #: the longest plan the schema lets the model write
        self.max_steps = max_steps
        #: whether a plan is checked against the request, and asked for again when it fails
        self.check = check
        #: how many more plans, each from other worked examples, the plan's result is compared with
        self.samples = sample_count(samples)

    def answer_problem(
        self, answer: Any, request: str, steps: Sequence[PlanStep], *, final: bool
    ) -> str | None:
        """The grounding check (:func:`~aeon_plugins.planning.grounding.grounding_problem`) of a model's answer to
        one of this planner's steps, unless ``check`` is off: both of this planner's checks fit a small model."""
        return grounding_problem(answer, request, steps, final=final) if self.check else None

    def generate_plan(
        self,
        task_description: str,
        task_profile: Any,
        tool_registry: ToolRegistry,
        *,
        record: RecordAction | None = None,
    ) -> Plan:
        tools = tool_registry.export_tools_for_llm()
        plan = self._checked(task_description, tools, tool_registry, record)
        if self.samples:
            check = self._agreement(plan, task_description, tools, tool_registry)
            if check is not None:
                (record or ignore_action)(check)
        return plan

    def _checked(
        self,
        task_description: str,
        tools: list[dict[str, Any]],
        tool_registry: ToolRegistry,
        record: RecordAction | None,
    ) -> Plan:
        """The plan, checked against the request and asked for again when it does not fit (``check``)."""
        prompt = plan_prompt(task_description, tools)
        plan = self._plan(prompt, plan_schema(tools, self.max_steps), tool_registry, record)
        if not self.check:
            return plan
        emit = record or ignore_action
        problems = self._problems(plan, task_description, tool_registry)
        if not problems:
            emit(_plan_check("passed"))
            return plan
        if self.llm.supports_json_schema and len(task_description) <= MAX_GOAL_CHARS:
            plan, problems = self._again(
                plan, problems, prompt, task_description, tools, tool_registry, record
            )
            if not problems:
                return plan
        # (not asked again otherwise: to a model that cannot be constrained it would be the same prompt again)
        return self._kept(plan, problems, task_description, tool_registry, emit)

    def _agreement(
        self, plan: Plan, request: str, tools: list[dict[str, Any]], tool_registry: ToolRegistry
    ) -> Check | None:
        """The ``plans_agree`` check (:mod:`~aeon_plugins.planning.agreement`), or None for a plan whose result
        is not known before it runs: then no sample is asked for."""
        first = outcome(plan, tool_registry)
        if first.problem is not None:
            return None
        schema = plan_schema(tools, self.max_steps)
        samples = []
        for rank in range(self.samples):
            try:  # the samples' repairs are not the run's: nothing of theirs is recorded
                sample = self._plan(plan_prompt(request, tools, leave_out=rank), schema, tool_registry, None)
            except (SupervisorError, ValidationError) as exc:
                samples.append(Outcome(problem=f"no valid plan: {exc}"))
            else:
                samples.append(outcome(sample, tool_registry))
        return agreement(first, samples)

    def _kept(
        self, plan: Plan, problems: list[str], request: str, tool_registry: ToolRegistry, emit: RecordAction
    ) -> Plan:
        """A plan whose findings remain: calls to a tool the request asks nothing of are not made (the step is
        answered by the model instead); what is still flagged is recorded as an inconclusive check, so the run's
        result cannot claim to be verified (decision 0018)."""
        found = tool_reviews(request, _proposed(plan), tool_registry, whole_request=True)
        unrelated = {
            name for name, review in found.items() if isinstance(review, Review) and review.unrelated
        }
        if unrelated:
            steps = _once(
                s.model_copy(update={"tool": None, "arguments": None, "agent": "llm"})
                if s.tool in unrelated
                else s
                for s in plan.steps
            )
            repeated = len(plan.steps) - len(steps)
            plan = plan.model_copy(update={"steps": steps})
            left = self._problems(plan, request, tool_registry)
            if not left:
                names = ", ".join(sorted(unrelated))
                also = f", and {repeated} steps that only repeated the one before" if repeated else ""
                emit(
                    _plan_check("resolved", f"{' '.join(problems)} The calls to {names} were left out{also}.")
                )
                return plan
            problems = left
        # The plan check reads numbers and words, so a finding may be a false alarm ("3 ^ 3" for "3 cubed" uses 3
        # twice): what stays flagged leaves the result unverified. A tool's own review of the calls made, when the
        # run ends, is what contradicts it.
        emit(_plan_check("inconclusive", " ".join(problems)))
        return plan

    def _problems(self, plan: Plan, request: str, tool_registry: ToolRegistry) -> list[str]:
        """What shows the plan was not written for ``request``: the plan check's findings, then what each tool's
        review (``Tool.review``) finds in the calls the plan proposes to it (to a plan that calls no tool: what a
        tool finds in no call, when the request is its business)."""
        problems = plan_problems(plan.steps, request)
        # a plan that calls no tool: does a tool say the request is its business (a review of no call)?
        no_tool = not any(step.tool for step in plan.steps)
        proposed = {name: [] for name in tool_registry.list_all()} if no_tool else _proposed(plan)
        # a review that raised proves nothing here: the kernel's review of the calls made records it as inconclusive
        for review in tool_reviews(request, proposed, tool_registry).values():
            if isinstance(review, Review) and not (no_tool and review.unrelated):
                problems += [f for f in review.findings if f not in problems]
        return problems

    def _plan(
        self, prompt: str, schema: dict[str, Any], tool_registry: ToolRegistry, record: RecordAction | None
    ) -> Plan:
        text = self.llm.generate(prompt, SYSTEM_PROMPT, self.max_tokens, self.temperature, json_schema=schema)
        constrained = schema if self.llm.supports_json_schema else None
        return parse_plan(
            text["text"], tool_registry, self.supervisor, self.validator, record=record, schema=constrained
        ).plan

    def _again(
        self,
        plan: Plan,
        problems: list[str],
        prompt: str,
        request: str,
        tools: list[dict[str, Any]],
        tool_registry: ToolRegistry,
        record: RecordAction | None,
    ) -> tuple[Plan, list[str]]:
        """The plan asked for once more, its goal fixed to the request, then with other worked examples
        (:data:`OTHER_EXAMPLES`): the first that passes (with no problems left); else the first ``plan`` and its
        ``problems``. A model that is unavailable (LLMError) fails the run as always (FR-049)."""
        original = {**plan.model_dump(mode="json", exclude_defaults=True), "errors": problems}
        emit = record or ignore_action
        schema = plan_schema(tools, self.max_steps, goal=request)
        prompts = [prompt, *(plan_prompt(request, tools, leave_out=rank) for rank in OTHER_EXAMPLES)]
        error: dict[str, Any] = {}
        for attempt in dict.fromkeys(prompts):  # a pool too small to vary gives the same prompt: asked once
            try:
                again = self._plan(attempt, schema, tool_registry, record)
            except (SupervisorError, ValidationError) as exc:  # no valid plan came back, not even by repair
                error = {"message": f"The plan asked for again is not valid: {exc}"}
                continue
            written = again.model_dump(mode="json", exclude_defaults=True)
            left = self._problems(again, request, tool_registry)
            if not left:
                emit(_action(original, repaired=written))
                emit(_plan_check("resolved", f"asked for again: {' '.join(problems)}"))
                return again, []
            error = {"message": f"The plan asked for again fails too: {' '.join(left)}", "reply": written}
        error["message"] += " The first plan is kept."
        emit(_action(original, error=error))
        return plan, problems


def sample_count(samples: Any) -> int:
    """``[planner] samples``, checked: each sample leaves out one of the examples a plan prompt shows."""
    if type(samples) is not int or not 0 <= samples <= EXAMPLES_SHOWN:
        raise ConfigError(
            "planner: samples is how many more plans are written to compare with the plan "
            f"(0-{EXAMPLES_SHOWN}), got {samples!r}"
        )
    return samples


def _action(
    original: dict[str, Any], repaired: dict[str, Any] | None = None, error: dict[str, Any] | None = None
) -> SupervisorAction:
    return SupervisorAction(
        action_type="plan_repair",
        original_output=original,
        repaired_output=repaired,
        error=error,
        attempt_number=1,
        method="llm",
    )


def _proposed(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """The calls the plan proposes, by tool, as ``Tool.review`` takes them (steps whose arguments the model
    writes when they run are reviewed after they ran, by the kernel)."""
    proposed: dict[str, list[dict[str, Any]]] = {}
    for step in plan.steps:
        if step.tool is not None and step.arguments is not None:
            proposed.setdefault(step.tool, []).append({"arguments": step.arguments})
    return proposed


def _once(steps: Iterable[PlanStep]) -> tuple[PlanStep, ...]:
    """``steps`` without a model step that only repeats the one before it (same description; a small model writes
    "Write a haiku about autumn" ten times once its calculator calls are taken out): its answer would be the same."""
    kept: list[PlanStep] = []
    for step in steps:
        if not (
            kept and step.tool is None and kept[-1].tool is None and step.description == kept[-1].description
        ):
            kept.append(step)
    return tuple(kept)


def _plan_check(verdict: CheckVerdict, detail: str | None = None) -> Check:
    return Check(name="plan_fits_request", subject="plan", verdict=verdict, detail=detail, by="model planner")
