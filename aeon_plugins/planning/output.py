"""Typed output (issue 28): the step that writes a run's result in the form its caller asked for.

A run started with an output schema (``engine.run(request, output_type=...)``, ``aeon run --schema``) gets one more
step after its plan's: :func:`with_output_step` appends it when the plan is accepted, so the text answer of the
plan's own last step stays what it was. The step asks the model for the output with decoding constrained to the
schema where the backend can — once a tool has run, its numbers narrowed to those the grounding check accepts
(:func:`decoding_schema`) — then holds it to the rules every model output meets: parsed, validated against the
schema and repaired by the supervisor when it is not (≤ 2 attempts, FR-032), and grounded like an answer — a number
no request and no tool result supports is asked for once more, then fails the step. Nothing is made up in its
place: a run whose output could not be written ends ``failed``, never ``completed`` with an output nobody checked.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from aeon_kernel import Plan, PlanStep, StepExecutionResult, StepStatus
from aeon_kernel.errors import SupervisorError, ValidationError
from aeon_kernel.kit import StepContext, ask_json, json_problem
from aeon_plugins.planning.grounding import grounded_numbers, judged_problem, numbers_in
from aeon_plugins.planning.prompts import compact, step_summary

OUTPUT_DESCRIPTION: Final = "Give the result in the requested form"

_EXAMPLE: Final = (
    "Request: what is 6 times 7? Give the product.\n"
    'Schema: {"type": "object", "properties": {"product": {"type": "number"}}, "required": ["product"]}\n'
    'Step 1 [complete] Multiply 6 by 7. Result: {"value": 42}\n'
    "Answer: 6 times 7 is 42.\n"
    'Output: {"product": 42}'
)


def with_output_step(plan: Plan) -> Plan:
    """``plan`` with the output step after its own (an id none of its steps has)."""
    taken = {step.step_id for step in plan.steps}
    step_id, n = "output", 1
    while step_id in taken:
        n += 1
        step_id = f"output{n}"
    step = PlanStep(step_id=step_id, description=OUTPUT_DESCRIPTION, agent="llm")
    return plan.model_copy(update={"steps": (*plan.steps, step)})


def is_output_step(step: PlanStep, steps: Sequence[PlanStep], output_schema: dict[str, Any] | None) -> bool:
    """Whether ``step`` writes the typed output: the last step of a run that asked for one."""
    return output_schema is not None and bool(steps) and steps[-1].step_id == step.step_id


def answer_step_id(steps: Sequence[PlanStep], output_schema: dict[str, Any] | None) -> str | None:
    """The step whose answer is the run's text answer: the last one, or the one before the output step."""
    answering = steps[:-1] if output_schema is not None else steps
    return answering[-1].step_id if answering else None


def output_prompt(
    state: str, request: str, schema: dict[str, Any], answer: Any = None, correction: str = ""
) -> str:
    """Ask for the typed output, from the results so far and, nearest the output, the run's checked text answer
    (a small model copies the number closest to where it writes, and the answer states the tools' result)."""
    return (
        "Give the result of the request as JSON matching the schema, from the results so far. Write only values "
        "that the request or the results give.\n"
        f"Example:\n{_EXAMPLE}\n\n"
        f"Request: {request}\nSchema: {json.dumps(schema, ensure_ascii=False)}\n{state}\n"
        + (f"Answer: {compact(answer)}\n" if answer is not None else "")
        + (f"{correction}\n" if correction else "")
        + "Output:"
    )


def write_output(step: PlanStep, ctx: StepContext) -> StepExecutionResult:
    """Run the output step: the model's output under the schema, checked, asked for once more when it states a
    number nothing supports, failed when it still does."""
    schema = ctx.output_schema
    assert schema is not None, "only a run that asked for an output has an output step"
    state = ctx.state
    steps = state.plan.steps if state.plan else ()
    summary = step_summary(ctx)
    answered = steps[-2] if len(steps) > 1 and steps[-2].status is StepStatus.COMPLETE else None
    answer = answered.result if answered is not None else None
    decode = decoding_schema(schema, grounded_numbers(state.request, steps))
    try:
        prompt = output_prompt(summary, state.request, schema, answer)
        output = _model_output(ctx, prompt, schema, decode)
        problem = _output_problem(ctx, output, state.request, steps)
        if problem is not None:
            correction = (
                f"Your first output was {compact(output)}. {problem} Write it again from the results."
            )
            prompt = output_prompt(summary, state.request, schema, answer, correction)
            output = _model_output(ctx, prompt, schema, decode)
            if (again := _output_problem(ctx, output, state.request, steps)) is not None:
                return StepExecutionResult(
                    success=False,
                    error=f"the model's output contradicted the tools twice ({again})",
                    execution_mode="llm",
                )
    except (SupervisorError, ValidationError) as exc:
        return StepExecutionResult(
            success=False, error=f"the model's output could not be used: {exc}", execution_mode="llm"
        )
    try:
        ctx.memory.write(ctx.memory_key(step.step_id), output)
    except Exception as exc:
        return StepExecutionResult(
            success=False, error=f"could not store the output: {exc}", execution_mode="llm"
        )
    return StepExecutionResult(success=True, result=output, execution_mode="llm")


def decoding_schema(schema: dict[str, Any], grounded: tuple[set[float], set[float]] | None) -> dict[str, Any]:
    """The schema the output is decoded under: once a tool has run, each number it may state is one the grounding
    check accepts (an ``enum`` of them), and where it states one number only, the last tool's result — the check's
    own rules, put where a constrained decoder follows them (a small model otherwise copies the request's first
    number, and runs on in zeros). Validation and repairs keep the caller's schema."""
    if grounded is None:
        return schema
    facts, found = grounded
    numeric = _numeric(schema)
    allowed = found if len(numeric) == 1 and found else facts
    if not numeric or not allowed or len(allowed) > _MAX_ENUM:
        return schema
    values = sorted(allowed)

    def narrowed(node: Any) -> Any:
        if isinstance(node, list):
            return [narrowed(item) for item in node]
        if not isinstance(node, dict):
            return node
        copy = {key: narrowed(value) for key, value in node.items()}
        kinds = _kinds(copy)
        if "integer" in kinds:
            whole = [int(v) for v in values if v.is_integer()]
            return {**copy, "enum": whole} if whole else copy
        if "number" in kinds:
            return {**copy, "enum": [int(v) if v.is_integer() else v for v in values]}
        return copy

    return dict(narrowed(schema))


#: more grounded numbers than this, and the output's numbers are left free (the check still reads them)
_MAX_ENUM: Final = 64


def _numeric(schema: Any) -> list[Any]:
    """The sub-schemas of ``schema`` that are numbers."""
    if isinstance(schema, list):
        return [found for item in schema for found in _numeric(item)]
    if not isinstance(schema, dict):
        return []
    own = [schema] if _kinds(schema) & {"integer", "number"} else []
    return own + [found for value in schema.values() for found in _numeric(value)]


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The types a (sub-)schema names: its ``type``, one or a list."""
    kind = schema.get("type")
    return {kind} if isinstance(kind, str) else set(kind or ())


def _model_output(ctx: StepContext, prompt: str, schema: dict[str, Any], decode: dict[str, Any]) -> Any:
    value = ask_json(
        ctx.llm,
        ctx.supervisor,
        ctx.validator,
        prompt,
        schema,
        record=ctx.record,
        max_tokens=ctx.max_tokens,
        temperature=ctx.temperature,
        decode=decode,
    )
    if (problem := json_problem(value)) is not None:
        raise ValidationError(f"it is not JSON data: {problem}")
    return value


def _output_problem(ctx: StepContext, output: Any, request: str, steps: Sequence[PlanStep]) -> str | None:
    """The planner's judgement of the output, read as the text of its JSON: the numbers it states must be
    supported once a tool has run, and it must state the last tool's result when it states numbers at all."""
    text = json.dumps(output, ensure_ascii=False)
    return judged_problem(ctx, text, request, steps, final=bool(numbers_in(text)))
