"""Spec 002's StepExecutor: the three ways a step runs.

* **tool** — the step names a registered tool: arguments come from the plan or, when it has none, from the
  model; they are validated against ``input_schema`` (repaired by the supervisor when invalid), the tool runs,
  and its result must match ``output_schema`` or the call counts as a tool failure.
* **llm** — ``agent: "llm"``: the model answers the step from the results so far.
* **fallback** — no usable tool: the supervisor's ``repair_missing_tool_step`` may pick a registered tool;
  when it cannot, the model answers the step from its description.

``aeon_plugins.planning`` registers it as the ``trylast`` implementation of ``aeon_execute_step``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Literal

from aeon_kernel import PlanStep, StepExecutionResult, Tool, ToolCall
from aeon_kernel.errors import MemoryStoreError, SupervisorError, ValidationError
from aeon_kernel.kit import (
    Check,
    CheckVerdict,
    RepairScope,
    StepContext,
    admit_repair,
    describe,
    json_problem,
    parse_json,
)
from aeon_plugins.planning.grounding import judged_problem, tool_answer
from aeon_plugins.planning.output import answer_step_id, is_output_step, write_output
from aeon_plugins.planning.parse import tool_call_scope
from aeon_plugins.planning.prompts import (
    ANSWER_SCHEMA,
    SYSTEM_PROMPT,
    compact,
    reasoning_prompt,
    step_summary,
    tool_arguments_prompt,
)


def _failed(mode: Literal["tool", "llm", "fallback"], error: str, **fields: Any) -> StepExecutionResult:
    return StepExecutionResult(success=False, error=error, execution_mode=mode, **fields)


class KernelStepExecutor:
    """The default step executor (spec 002 StepExecutor): ``aeon_plugins.planning`` registers
    :data:`STEP_EXECUTOR` as the ``trylast`` implementation of ``aeon_execute_step``."""

    def execute_step(self, step: PlanStep, ctx: StepContext) -> StepExecutionResult:
        """Route to the tool, llm or fallback path (spec 001: ``tool`` takes precedence over ``agent``)."""
        check = ctx.validator.validate_step_tool(step, ctx.tools)
        if step.tool is not None and check.valid:
            return self.execute_tool_step(step, ctx)
        if step.tool is None and step.agent == "llm":
            return self.execute_llm_reasoning_step(step, ctx)
        return self._execute_missing_tool_step(check.step, ctx)

    def execute_tool_step(self, step: PlanStep, ctx: StepContext) -> StepExecutionResult:
        tool = ctx.tools.get(step.tool or "")
        if tool is None:
            return _failed("tool", f"tool {step.tool!r} is not registered")
        try:
            arguments = self._arguments(step, tool, ctx)
        except SupervisorError as exc:
            call = ToolCall(tool_name=tool.name, arguments={}, step_id=step.step_id, error=exc.to_dict())
            return _failed("tool", f"invalid arguments for {tool.name}: {exc}", tool_calls=(call,))
        call = ctx.call_tool(tool, arguments, step.step_id)
        if call.error is not None:
            return _failed("tool", str(call.error.get("message") or call.error), tool_calls=(call,))
        try:
            ctx.memory.write(ctx.memory_key(step.step_id), call.result)
        except Exception as exc:
            return _failed("tool", f"could not store the result: {_as_memory_error(exc)}", tool_calls=(call,))
        return StepExecutionResult.trusted(
            success=True,
            result=call.result,
            error=None,
            execution_mode="tool",
            tool_calls=(call,),
            repaired_step=None,
        )

    def _arguments(self, step: PlanStep, tool: Tool, ctx: StepContext) -> dict[str, Any]:
        """The plan's arguments, or the model's; validated, and repaired once invalid (FR-025, FR-030)."""
        # The plan's arguments are JSON data already (the scheduler checks plans, and the records it keeps).
        if step.arguments is not None:
            arguments: Any = step.arguments
        else:
            prompt = tool_arguments_prompt(step_summary(ctx), step, tool)
            text = ctx.llm.generate(
                prompt, SYSTEM_PROMPT, ctx.max_tokens, ctx.temperature, json_schema=tool.input_schema
            )["text"]
            arguments = _json_arguments(parse_json(text, ctx.supervisor, ctx.record))
        call = {"tool_name": tool.name, "arguments": arguments}
        try:
            ctx.validator.validate_tool_call(call, tool.input_schema)
            return dict(arguments)
        except ValidationError:
            repaired = ctx.supervisor.repair_tool_call(call, tool.input_schema, record=ctx.record)
        if repaired.get("tool_name", tool.name) != tool.name:
            raise SupervisorError(
                f"the repair changed the tool from {tool.name!r} to {repaired.get('tool_name')!r}"
            )
        admit_repair(call, repaired, tool_call_scope(tool.input_schema, arguments))  # FR-032
        try:
            ctx.validator.validate_tool_call(repaired, tool.input_schema)
        except ValidationError as exc:
            raise SupervisorError(
                f"the repaired arguments are still invalid: {exc}", last_error=str(exc)
            ) from None
        return dict(_json_arguments(repaired["arguments"]))

    def execute_llm_reasoning_step(
        self, step: PlanStep, ctx: StepContext, mode: Literal["llm", "fallback"] = "llm"
    ) -> StepExecutionResult:
        """Ask the model to do the step from the results so far; the answer is stored in memory like a tool's.

        An answer the planner finds wrong (``Planner.answer_problem``; the ``model`` planner's grounding: a number
        nothing supports, a final report without the result, the prompt's example copied) is asked for once more,
        told why; if it still is, the step answers with the last tool result, or fails when no tool has ended.
        """
        state = ctx.state
        steps = state.plan.steps if state.plan else ()
        if is_output_step(step, steps, ctx.output_schema):
            return write_output(step, ctx)
        summary = step_summary(ctx)
        final = answer_step_id(steps, ctx.output_schema) == step.step_id
        note = None
        judged = _judges_answers(ctx, steps)
        try:
            answer = _model_answer(ctx, reasoning_prompt(summary, state.request, step))
            problem = judged_problem(ctx, answer, state.request, steps, final=final)
            if problem is None and judged:
                ctx.record(_answer_check(step, "passed"))
            if problem is not None:
                first = compact(json.dumps(answer, ensure_ascii=False))
                correction = (
                    f"Your first answer was {first}. {problem} Answer again with what the results give."
                )
                answer = _model_answer(ctx, reasoning_prompt(summary, state.request, step, correction))
                if (again := judged_problem(ctx, answer, state.request, steps, final=final)) is not None:
                    note = f"the model's answer contradicted the tools twice ({again})"
                    fallback = tool_answer(steps)
                    if fallback is None:  # no tool to answer from: better no answer than a made-up one
                        ctx.record(_answer_check(step, "failed", again))
                        return _failed(mode, f"{note}; no tool result to answer from")
                    answer = fallback
                    ctx.record(_answer_check(step, "resolved", f"{again} Answered with the tools' result."))
                elif judged:
                    ctx.record(_answer_check(step, "resolved", f"{problem} Asked again."))
        except (SupervisorError, ValidationError) as exc:
            return _failed(mode, f"the model's answer could not be used: {exc}")
        try:
            ctx.memory.write(ctx.memory_key(step.step_id), answer)
        except Exception as exc:
            return _failed(mode, f"could not store the answer: {_as_memory_error(exc)}")
        if note is not None:  # grounded by the kernel, not by the model: said so in the step's record
            return StepExecutionResult(
                success=True,
                result=answer,
                error=f"{note}; answered with the last tool result",
                execution_mode="fallback",
            )
        return StepExecutionResult(success=True, result=answer, execution_mode=mode)

    def _execute_missing_tool_step(self, step: PlanStep, ctx: StepContext) -> StepExecutionResult:
        """Repair the step to use a registered tool (FR-066); when that fails, fall back to reasoning."""
        goal = ctx.state.plan.goal if ctx.state.plan else ctx.state.request
        try:
            repaired = ctx.supervisor.repair_missing_tool_step(
                step.model_dump(mode="json"), ctx.tools.export_tools_for_llm(), goal, record=ctx.record
            )
            registered = frozenset(ctx.tools.list_all())
            if repaired.get("tool") is not None and repaired.get("tool") not in registered:
                raise SupervisorError(
                    f"the repair names a tool that is not registered: {repaired.get('tool')!r}"
                )
            admit_repair(
                step.model_dump(mode="json"), repaired, RepairScope(tools=registered, arguments=None)
            )
            fixed = step.model_copy(
                update={"tool": repaired.get("tool"), "arguments": repaired.get("arguments"), "errors": ()}
            )
            fixed = PlanStep.model_validate(fixed.model_dump())
        except (SupervisorError, ValidationError, ValueError) as exc:
            result = self.execute_llm_reasoning_step(step, ctx, mode="fallback")
            note = f"no registered tool fits this step ({exc}); answered by the model instead"
            return result.model_copy(update={"error": result.error or note})
        if fixed.tool is None:
            return self.execute_llm_reasoning_step(fixed, ctx, mode="fallback")
        result = self.execute_tool_step(fixed, ctx)
        return result.model_copy(update={"repaired_step": fixed, "execution_mode": "fallback"})


def _judges_answers(ctx: StepContext, steps: Sequence[PlanStep]) -> bool:
    """Whether the planner's judgement of an answer checks it against tool results: some tool step has ended, and
    the planner checks (the ``model`` planner with ``check`` on, or any other planner's own judgement)."""
    return getattr(ctx.planner, "check", True) and any(
        s.tool is not None and s.status.is_terminal for s in steps
    )


def _answer_check(step: PlanStep, verdict: CheckVerdict, detail: str | None = None) -> Check:
    return Check(
        name="answer_grounded",
        subject="answer",
        verdict=verdict,
        detail=detail,
        step_id=step.step_id,
        by="planner",
    )


def _model_answer(ctx: StepContext, prompt: str) -> str:
    """The model's answer to ``prompt``: parsed, validated and repaired as every model output is."""
    text = ctx.llm.generate(
        prompt, SYSTEM_PROMPT, ctx.max_tokens, ctx.temperature, json_schema=ANSWER_SCHEMA
    )["text"]
    value = parse_json(text, ctx.supervisor, ctx.record, ANSWER_SCHEMA, ctx.validator)
    ctx.validator.validate_llm_output(value, ANSWER_SCHEMA)
    answer = value["answer"]
    if (problem := json_problem(answer)) is not None:
        raise ValidationError(f"it is not JSON data: {problem}")
    return str(answer)


def _json_arguments(arguments: Any) -> Any:
    """Arguments from the model or a repair are JSON data before a tool or a record sees them."""
    if (problem := json_problem(arguments)) is not None:
        raise SupervisorError(f"the arguments are not JSON data: {problem}")
    return arguments


def _as_memory_error(exc: Exception) -> str:
    return describe(exc) if isinstance(exc, MemoryStoreError) else f"{type(exc).__name__}: {describe(exc)}"


#: the one executor the package's ``aeon_execute_step`` implementation delegates to (it keeps no state)
STEP_EXECUTOR: Final = KernelStepExecutor()
