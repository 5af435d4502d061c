"""Spec 002's StepExecutor: the three ways a step runs.

* **tool** — the step names a registered tool: arguments come from the plan or, when it has none, from the
  model; they are validated against ``input_schema`` (repaired by the supervisor when invalid), the tool runs,
  and its result must match ``output_schema`` or the call counts as a tool failure.
* **llm** — ``agent: "llm"``: the model answers the step from the results so far.
* **fallback** — no usable tool: the supervisor's ``repair_missing_tool_step`` may pick a registered tool;
  when it cannot, the model answers the step from its description.

The kernel registers this executor as the ``trylast`` implementation of ``aeon_execute_step``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from aeon_kernel.contracts import Memory, RecordAction, Supervisor, Tool, Validator
from aeon_kernel.errors import AeonError, MemoryStoreError, SupervisorError, ValidationError
from aeon_kernel.hookspecs import hookimpl
from aeon_kernel.idempotency import idempotency_scope
from aeon_kernel.llm import ModelClient
from aeon_kernel.models import OrchestrationState, PlanStep, StepExecutionResult, ToolCall, utc_now
from aeon_kernel.output import ensure_no_new_tools, parse_json
from aeon_kernel.prompts import (
    ANSWER_SCHEMA,
    SYSTEM_PROMPT,
    reasoning_prompt,
    state_summary,
    tool_arguments_prompt,
)
from aeon_kernel.registry import ToolRegistry


def memory_key(run_id: str, step_id: str) -> str:
    """Where a step's result lives in memory: ``run/<run_id>/<step_id>``."""
    return f"run/{run_id}/{step_id}"


@dataclass(slots=True)
class StepContext:
    """What a step may use: the run's components and, through ``state``, an immutable snapshot of its state.

    One is made per step and nothing reads it back, so it is a plain (slotted, cheap to build) dataclass. The
    snapshot is built only when a step asks for ``state``: most tool steps never do.
    """

    run_id: str
    snapshot: Callable[[], OrchestrationState]
    tools: ToolRegistry
    memory: Memory
    llm: ModelClient
    supervisor: Supervisor
    validator: Validator
    record: RecordAction
    max_tokens: int = 512
    temperature: float = 0.0

    @property
    def state(self) -> OrchestrationState:
        """The run's state as the step starts (the step itself is ``running``)."""
        return self.snapshot()

    def memory_key(self, step_id: str) -> str:
        return memory_key(self.run_id, step_id)

    def summary(self) -> str:
        """FR-002: goal, earlier results (read back from memory, FR-018), errors, and TTL, for the next prompt."""
        prefix = self.memory_key("")
        results = [(key[len(prefix) :], value) for key, value in self.memory.search(prefix)]
        state = self.state
        goal = state.plan.goal if state.plan else state.request
        return state_summary(goal, results, list(state.errors), state.ttl_remaining)


def _failed(mode: Literal["tool", "llm", "fallback"], error: str, **fields: Any) -> StepExecutionResult:
    return StepExecutionResult(success=False, error=error, execution_mode=mode, **fields)


class KernelStepExecutor:
    """The kernel's own step executor (spec 002 StepExecutor)."""

    @hookimpl(trylast=True)
    def aeon_execute_step(self, step: PlanStep, context: StepContext) -> StepExecutionResult:
        return self.execute_step(step, context)

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
        with idempotency_scope(ctx.run_id, step.step_id):
            call = _invoke(tool, arguments, step.step_id)
        if call.error is not None:
            return _failed("tool", call.error["message"], tool_calls=(call,))
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
        if step.arguments is not None:
            arguments: Any = step.arguments
        else:
            prompt = tool_arguments_prompt(ctx.summary(), step, tool)
            text = ctx.llm.generate(
                prompt, SYSTEM_PROMPT, ctx.max_tokens, ctx.temperature, json_schema=tool.input_schema
            )["text"]
            arguments = parse_json(text, ctx.supervisor, ctx.record)
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
        ensure_no_new_tools(call, repaired)
        try:
            ctx.validator.validate_tool_call(repaired, tool.input_schema)
        except ValidationError as exc:
            raise SupervisorError(
                f"the repaired arguments are still invalid: {exc}", last_error=str(exc)
            ) from None
        return dict(repaired["arguments"])

    def execute_llm_reasoning_step(
        self, step: PlanStep, ctx: StepContext, mode: Literal["llm", "fallback"] = "llm"
    ) -> StepExecutionResult:
        """Ask the model to do the step from the results so far; the answer is stored in memory like a tool's."""
        prompt = reasoning_prompt(ctx.summary(), ctx.state.request, step)
        text = ctx.llm.generate(
            prompt, SYSTEM_PROMPT, ctx.max_tokens, ctx.temperature, json_schema=ANSWER_SCHEMA
        )["text"]
        try:
            value = parse_json(text, ctx.supervisor, ctx.record, ANSWER_SCHEMA, ctx.validator)
            ctx.validator.validate_llm_output(value, ANSWER_SCHEMA)
        except (SupervisorError, ValidationError) as exc:
            return _failed(mode, f"the model's answer could not be used: {exc}")
        answer = value["answer"]
        try:
            ctx.memory.write(ctx.memory_key(step.step_id), answer)
        except Exception as exc:
            return _failed(mode, f"could not store the answer: {_as_memory_error(exc)}")
        return StepExecutionResult(success=True, result=answer, execution_mode=mode)

    def _execute_missing_tool_step(self, step: PlanStep, ctx: StepContext) -> StepExecutionResult:
        """Repair the step to use a registered tool (FR-066); when that fails, fall back to reasoning."""
        goal = ctx.state.plan.goal if ctx.state.plan else ctx.state.request
        try:
            repaired = ctx.supervisor.repair_missing_tool_step(
                step.model_dump(mode="json"), ctx.tools.export_tools_for_llm(), goal, record=ctx.record
            )
            ensure_no_new_tools({"tool": repaired.get("tool")}, repaired, ctx.tools.list_all())
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


def _invoke(tool: Tool, arguments: dict[str, Any], step_id: str) -> ToolCall:
    """Run a tool; any exception, or a result that breaks ``output_schema``, is a tool failure (FR-054)."""
    started = time.perf_counter()
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    try:
        result = tool.invoke(**arguments)
        if not isinstance(result, dict):
            raise ValidationError(f"{tool.name} returned {type(result).__name__}, not an object")
        tool.validate_output(result)
    except Exception as exc:
        result = None
        if isinstance(exc, AeonError):
            error = {**exc.to_dict(), "message": f"{tool.name} failed: {exc}"}
        else:
            error = {
                "type": type(exc).__name__,
                "message": f"{tool.name} failed: {type(exc).__name__}: {exc}",
            }
    # Every field is built here, and ``result`` xor ``error`` holds by construction.
    return ToolCall.trusted(
        tool_name=tool.name,
        arguments=arguments,
        step_id=step_id,
        result=result,
        error=error,
        duration_ms=_ms(started),
        timestamp=utc_now(),
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _as_memory_error(exc: Exception) -> str:
    return str(exc) if isinstance(exc, MemoryStoreError) else f"{type(exc).__name__}: {exc}"
