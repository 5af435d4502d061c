"""The kernel's prompts and the JSON Schemas it expects back.

Prompts are short and stable: the fixed part (instructions, tools) comes first and the request-specific part
last (the plan's worked examples, chosen per request, then the request), so llama.cpp can reuse its prompt
cache between cycles. Each prompt has a matching
schema that is passed to adapters able to constrain decoding, and is always checked afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from aeon_kernel.kit import SYSTEM_PROMPT as SYSTEM_PROMPT  # the planning prompts are asked with it
from aeon_kernel.kit import canonical_json, compiled_validator, json_encoder, scrub_secrets
from aeon_plugins.planning.examples import plan_examples

if TYPE_CHECKING:
    from aeon_kernel import PlanStep, Tool
    from aeon_kernel.kit import StepContext


MAX_PLAN_STEPS: Final = 10

ANSWER_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1}},
    "required": ["answer"],
    "additionalProperties": False,
}

#: The worked example's request and answer: a small model copies them, so an answer equal to it is checked.
EXAMPLE_REQUEST: Final = "what is 6 times 7?"
EXAMPLE_ANSWER: Final = "6 times 7 is 42."
_ANSWER_EXAMPLE: Final = (
    f"Request: {EXAMPLE_REQUEST}\n"
    "Goal: Multiply 6 by 7\n"
    'Step 1 [complete] Multiply 6 by 7. Result: {"expression": "6 * 7", "value": 42}\n'
    "Step 2 [running] Report the product\n"
    "Now do step 2: Report the product\n"
    f'Answer: {{"answer": "{EXAMPLE_ANSWER}"}}'
)


# Bounded strings keep a small model from running away inside a string until max_tokens cuts the JSON.
_SHORT_ID: Final = {"type": "string", "minLength": 1, "maxLength": 16}
_TEXT: Final = {"type": "string", "minLength": 1, "maxLength": 200}


def plan_schema(
    tools: list[dict[str, Any]], max_steps: int = MAX_PLAN_STEPS, goal: str | None = None
) -> dict[str, Any]:
    """The plan a model may write: each step either uses one registered tool (with its arguments) or thinks.

    Naming the tools in the schema lets a constrained decoder only write tools that exist; the validator and
    the supervisor still check everything, for models that cannot be constrained. A ``goal`` fixes the plan's
    goal to that text (the model planner's second attempt: a small model that has just written the request out
    as the goal plans for all of it more often than for the part its own goal kept).
    """
    tool_steps = [
        {
            "type": "object",
            "properties": {
                "step_id": _SHORT_ID,
                "description": _TEXT,
                "tool": {"const": tool["name"]},
                "arguments": tool["input_schema"],
            },
            "required": ["step_id", "description", "tool", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    thinking_step = {
        "type": "object",
        "properties": {
            "step_id": _SHORT_ID,
            "description": _TEXT,
            "agent": {"const": "llm"},
        },
        "required": ["step_id", "description", "agent"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "goal": _TEXT if goal is None else {"const": goal},
            "steps": {
                "type": "array",
                "items": {"anyOf": [*tool_steps, thinking_step]},
                "minItems": 1,
                "maxItems": max_steps,
            },
        },
        "required": ["goal", "steps"],
        "additionalProperties": False,
    }


def _tool_lines(tools: list[dict[str, Any]]) -> str:
    if not tools:
        return '(no tools: every step uses "agent": "llm")'
    return "\n".join(
        f"- {t['name']}: {t['description']} Arguments: {canonical_json(t['input_schema'].get('properties', {}))}"
        for t in tools
    )


def plan_prompt(request: str, tools: list[dict[str, Any]], leave_out: int | None = None) -> str:
    """FR-006: ask for a declarative plan. Stable prefix first; then the worked examples most like the request
    (:mod:`aeon_plugins.planning.examples`; ``leave_out``: the rank of one to replace) and the request."""
    return (
        'Write a plan as JSON with a "goal" and a list of "steps". Each step has a "step_id" and a '
        '"description", and either a "tool" with its "arguments", or "agent": "llm" for a step that '
        'thinks or writes the answer. End with an "agent": "llm" step that reports the answer.\n'
        f"Tools:\n{_tool_lines(tools)}\n"
        f"Examples:\n{plan_examples(request, [t['name'] for t in tools], leave_out=leave_out)}\n\n"
        f"Request: {request}\nPlan:"
    )


def state_summary(
    goal: str,
    steps: Sequence[PlanStep],
    results: Mapping[str, Any],
    errors: list[dict[str, Any]],
    ttl: int,
) -> str:
    """FR-002/FR-055: the goal; every step in plan order with its status and its result (read back from memory,
    FR-018); results of steps no longer in the plan; the last errors; the remaining TTL. Compactly."""
    lines = [f"Goal: {goal}"]
    for step in steps:
        line = f"Step {step.step_id} [{step.status}] {step.description}"
        if step.step_id in results:
            line += f". Result: {compact(results[step.step_id])}"
        lines.append(line)
    listed = {step.step_id for step in steps}
    lines += [
        f"Result of step {key}: {compact(value)}" for key, value in results.items() if key not in listed
    ]
    if not results:
        lines.append("No results yet.")
    lines += [f"Error: {e.get('step_id', '-')}: {e.get('message', '')}" for e in errors[-3:]]
    lines.append(f"Cycles left: {ttl}")
    return "\n".join(lines)


def step_summary(context: StepContext) -> str:
    """FR-002: the goal, the plan's steps in order with their statuses and results (read back from memory,
    FR-018), errors, and TTL, for the next prompt of a step."""
    state = context.state
    goal, steps = (state.plan.goal, state.plan.steps) if state.plan else (state.request, ())
    return state_summary(goal, steps, context.results(), list(state.errors), state.ttl_remaining)


def tool_arguments_prompt(state: str, step: PlanStep, tool: Tool) -> str:
    """Ask for the arguments of a tool step whose plan did not carry them."""
    return (
        f"Give the arguments for the tool {tool.name} ({tool.description}) as a JSON object matching "
        f"this schema: {compiled_validator(tool.input_schema).text}\n"
        f"{state}\n"
        f"Now give the arguments of step {step.step_id}: {step.description}\nArguments:"
    )


def reasoning_prompt(state: str, request: str, step: PlanStep, correction: str = "") -> str:
    """An ``agent: "llm"`` step, or the fallback for a step no tool could serve: answer from the results.
    ``correction`` says what was wrong with the previous answer, when the step is asked again."""
    return (
        'Do the step below, using the results so far. Reply as JSON with one key, "answer".\n'
        f"Example:\n{_ANSWER_EXAMPLE}\n\n"
        f"Request: {request}\n{state}\n"
        f"Now do step {step.step_id}: {step.description}\n"
        + (f"{correction}\n" if correction else "")
        + "Answer:"
    )


_encode_compact = json_encoder(ensure_ascii=False, default=str)


def compact(value: Any, limit: int = 400) -> str:
    """``value`` as one line of text (JSON unless it is a string), cut to ``limit`` characters with an ellipsis."""
    text = scrub_secrets(value if isinstance(value, str) else _encode_compact(value))  # before the cut
    return text if len(text) <= limit else text[: limit - 1] + "…"
