"""The linear plan scheduler (``linear``, the default): plan, then every step strictly in order (FR-001…055).

The first cycle asks the planner for the plan; each later cycle starts the next pending step, executes it through
``aeon_execute_step``, and records it complete or failed (FR-052). When no step is left, the convergence engine
decides whether the run reached its answer (FR-004). The run around it owns the TTL, the records and the store.
It keeps no memo: its state is the plan. Between cycles, :meth:`LinearPlanScheduler.preview` tells the next one
(:mod:`aeon_plugins.planning.preview`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any, Final, Never

from aeon_kernel import (
    Conclusion,
    ConvergenceAssessment,
    OrchestrationState,
    Plan,
    PlanStep,
    Preview,
    RunContext,
    Scheduler,
    StepExecutionResult,
    StepStatus,
    ToolCall,
    Verdict,
    Work,
)
from aeon_kernel.errors import ApprovalRequired, LLMError, SupervisorError, ValidationError
from aeon_kernel.kit import (
    StepContext,
    describe,
    error_record,
    json_problem,
    memory_key,
    safe_text,
    was_checked,
)
from aeon_plugins.planning.output import with_output_step
from aeon_plugins.planning.parse import parsed_by
from aeon_plugins.planning.preview import planning_preview, step_preview

_PLAN: Final = Work("plan")
#: what ``perform`` returns: the plan (the first cycle), or a step's result
LinearOutcome = Plan | StepExecutionResult


class LinearPlanScheduler(Scheduler[Never, LinearOutcome]):  # Never: no memo, its state is the plan
    """One plan, its steps one after another."""

    writes_typed_output = True  # one more step writes it (aeon_plugins.planning.output)

    def __init__(self, *, blocked_is_invalid: bool = False) -> None:
        #: True (multi-pass): a step that fails ends ``invalid`` (spec 003's BLOCKED), holding the run's place
        #: until a refinement replaces it, instead of ``failed``
        self.blocked_is_invalid = blocked_is_invalid
        # What a step executor may use is the same for every step of a run: built once, at its first step.
        self._step_context: tuple[RunContext, StepContext] | None = None
        #: what the run's typed output must match (set by ``start``), or None
        self._output_schema: dict[str, Any] | None = None

    def start(self, run: RunContext, *, resumed: bool) -> None:
        self._output_schema = run.output_schema
        if resumed:
            _restore_memory(run)

    def status(self, run: RunContext) -> Verdict | None:
        """Failed without a plan (FR-049); when no step is left, what the convergence engine says (FR-004)."""
        state = run.state
        if state.goal is None:
            return Verdict("failed") if state.cycle > 0 else None
        if state.current_step_id is not None:
            return None
        assessment = _assess(run, state.plan())  # type: ignore[arg-type]  # a goal means a plan
        return Verdict("completed" if state.all_complete() and assessment.converged else "failed", assessment)

    def next_work(self, run: RunContext) -> Work:
        """The plan first; then the current step, started (a running one is what a crashed process left)."""
        state = run.state
        if state.goal is None:
            return _PLAN
        assert state.current_step_id is not None, "status() said a step is left"
        step = state.step(state.current_step_id)
        if step.status is StepStatus.PENDING:
            _transition(run, step.step_id, StepStatus.RUNNING)
        return Work("step", step.step_id, (step.step_id,))  # Work.of, without its join for one unit

    def perform(self, work: Work, run: RunContext) -> LinearOutcome:
        if work.step_id is None:
            components = run.components
            return components.planner.generate_plan(
                run.state.request, None, components.tools, record=run.record_action
            )
        return _execute_step(run.state.step(work.step_id), self._context_for(run), run)

    def apply(self, work: Work, outcome: LinearOutcome, run: RunContext) -> None:
        if work.step_id is None:
            # A new plan starts with every step pending (spec 001), whatever statuses the planner wrote.
            if not isinstance(outcome, Plan):
                raise ValidationError(f"the planner returned a {type(outcome).__name__}, not a Plan")
            plan, validator = outcome, run.components.validator
            # whatever planner wrote it: JSON data, within the validator's rules and limits
            if not parsed_by(plan, validator):
                dump = plan.model_dump()
                if (problem := json_problem(dump)) is not None:
                    raise ValidationError(f"the plan is not JSON data: {problem}")
                validator.validate_plan(dump)
            fresh = tuple(
                s.model_copy(
                    update={"status": StepStatus.PENDING, "errors": (), "result": None, "failure": None}
                )
                for s in plan.steps
            )
            plan = plan.model_copy(update={"steps": fresh})
            if run.output_schema is not None:  # the caller asked for a typed output: a step writes it
                plan = with_output_step(plan)
            run.state.start_plan(plan)
            return
        assert isinstance(outcome, StepExecutionResult), "_execute_step returns one"
        result = _usable(outcome)
        run.record_tool_calls(result.tool_calls)
        if result.repaired_step is not None:
            run.state.replace_step(
                result.repaired_step.model_copy(update={"status": StepStatus.RUNNING, "errors": ()})
            )
        if result.success:
            # succeeded another way than asked (a fallback, a grounded answer): kept, not failed
            if result.error:
                note = {"type": "StepNote", "message": safe_text(result.error), "step_id": work.step_id}
                run.fail_cycle(note)
            _transition(run, work.step_id, StepStatus.COMPLETE, result=result.result)
        else:
            message = safe_text(result.error or "the step failed")
            run.fail_cycle({"type": "StepFailed", "message": message, "step_id": work.step_id})
            blocked = StepStatus.INVALID if self.blocked_is_invalid else StepStatus.FAILED
            _transition(run, work.step_id, blocked, failure=message)

    def give_up(self, run: RunContext, step_id: str) -> None:
        """An invalid step that no refinement replaced: failed, so that the run goes on past it (spec 003: "execution
        continues with the best available plan")."""
        why = run.state.step(step_id).failure or "the step was blocked"
        _transition(run, step_id, StepStatus.FAILED, failure=f"{why} (no refinement replaced it)")

    def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:
        """A step left running by a failed cycle is marked failed, and the run goes on (FR-054)."""
        state = run.state
        step_id = state.current_step_id
        if (
            state.goal is not None
            and step_id is not None
            and state.step(step_id).status is StepStatus.RUNNING
        ):
            _transition(run, step_id, StepStatus.FAILED, failure=f"{type(error).__name__}: {describe(error)}")

    def conclude(self, state: OrchestrationState, verdict: Verdict) -> Conclusion:
        message = _message(state, verdict.status)
        if self._output_schema is None or state.plan is None:
            return Conclusion(answer=_answer(state.plan), message=message)
        *steps, last = state.plan.steps  # the output step is the last (with_output_step)
        output = _copy(last.result) if last.status is StepStatus.COMPLETE else None
        return Conclusion(answer=_answer(steps), message=message, details={"output": output})

    def end(self, run: RunContext) -> None:
        """The steps' results in memory were for the run's own prompts (a resumed run writes them back)."""
        run.components.memory.release(memory_key(run.run_id, ""))

    def preview(self, run: RunContext) -> Preview | None:
        """The plan generation, or the current step; None where :meth:`status` ends the run (no plan after the
        first cycle, or no step left)."""
        state = run.state
        if state.goal is None:
            return None if state.cycle > 0 else planning_preview(run)
        if state.current_step_id is None:
            return None
        return step_preview(run)

    def _context_for(self, run: RunContext) -> StepContext:
        if (
            self._step_context is None or self._step_context[0] is not run
        ):  # a scheduler reused by another run
            components, state = run.components, run.state
            context = StepContext(
                run_id=state.run_id,
                snapshot=state.snapshot,
                tools=components.tools,
                memory=components.memory,
                llm=components.llm,
                supervisor=components.supervisor,
                validator=components.validator,
                record=run.record_action,
                invoke=run.hooks.caller("aeon_invoke_tool"),
                max_tokens=components.max_tokens,
                temperature=components.temperature,
                planner=components.planner,
                output_schema=run.output_schema,
                tool_started=partial(run.emit, "aeon_tool_started")
                if run.listens("aeon_tool_started")
                else None,
            )
            self._step_context = (run, context)
        return self._step_context[1]


def _execute_step(step: PlanStep, context: StepContext, run: RunContext) -> StepExecutionResult:
    """FR-052: execute the running step through the ``aeon_execute_step`` hook; any failure fails only the step."""
    try:
        result = run.hooks.caller("aeon_execute_step")(step=step, context=context)
    except (LLMError, SupervisorError, ApprovalRequired):  # the run fails, or waits for a person
        raise
    except Exception as exc:
        # FR-054: a failing step is marked failed and the run goes on.
        return StepExecutionResult(
            success=False, error=f"{type(exc).__name__}: {describe(exc)}", execution_mode="tool"
        )
    if not isinstance(result, StepExecutionResult):
        return StepExecutionResult(
            success=False, error="no step executor returned a StepExecutionResult", execution_mode="tool"
        )
    return result


def _transition(
    run: RunContext, step_id: str, status: StepStatus, *, result: Any = None, failure: str | None = None
) -> PlanStep:
    step, previous = run.state.transition(step_id, status, result=result, failure=failure)
    if run.listens("aeon_step_status_changed"):
        run.emit("aeon_step_status_changed", run_id=run.run_id, step=step, previous=previous)
    return step


def _assess(run: RunContext, plan: Plan) -> ConvergenceAssessment:
    """Ask the convergence engine; without one, a finished plan has converged."""
    convergence = run.components.convergence
    if convergence is None:
        finished = plan.is_finished
        return ConvergenceAssessment(
            converged=finished,
            completeness_score=1.0 if finished else 0.0,
            reason_codes=() if finished else ("steps_unfinished",),
        )
    results = [{"step_id": s.step_id, "status": s.status.value, "result": s.result} for s in plan.steps]
    try:
        return convergence.assess(plan.model_dump(mode="json"), results)
    except Exception as exc:
        run.record_error(error_record(exc, phase="convergence"))
        return ConvergenceAssessment(converged=False, reason_codes=("convergence_error",))


def _restore_memory(run: RunContext) -> None:
    """A resumed run may have a fresh memory: put back what completed steps stored (read by later prompts)."""
    state, memory = run.state, run.components.memory
    for step in state.steps:
        key = memory_key(state.run_id, step.step_id)
        if step.status is StepStatus.COMPLETE and memory.read(key) is None:
            memory.write(key, step.result)


def _answer(steps: Plan | Sequence[PlanStep] | None) -> Any:
    """The run's answer: the result of the last step that completed."""
    if steps is None:
        return None
    done = [s for s in (steps.steps if isinstance(steps, Plan) else steps) if s.status is StepStatus.COMPLETE]
    return _copy(done[-1].result) if done else None


def _copy(result: Any) -> Any:
    """A copy in JSON's own types (a tool may have returned tuples), not the state's object."""
    return json.loads(json.dumps(result)) if isinstance(result, (dict, list, tuple)) else result


def _message(state: OrchestrationState, status: str) -> str:
    if status == "completed":
        return "every step completed"
    if status == "ttl_expired":
        pending = [s.step_id for s in state.plan.steps if not s.status.is_terminal] if state.plan else []
        return (
            f"TTL expired after {state.cycle} cycles with steps {pending} unfinished; "
            "the state is kept in final_state. Continue a stored run with `aeon resume RUN_ID --ttl N`, or run it "
            "again with a larger TTL (--ttl, or [run] ttl in aeon.toml)."
        )
    if state.plan is None:
        return "no usable plan: " + (state.errors[-1]["message"] if state.errors else "unknown error")
    failed = [s.step_id for s in state.plan.steps if s.status is StepStatus.FAILED]
    if failed:
        return f"steps {failed} failed; see errors"
    return state.errors[-1]["message"] if state.errors else "the run did not converge"


def _usable(result: StepExecutionResult) -> StepExecutionResult:
    """What a step executor answered, held to JSON data before it enters the state (FR-009): its result, its tool
    call records and a repaired step. A result or repaired step that is not JSON fails the step; a tool call
    record that is not keeps only an error saying so. The bad values themselves are left out."""
    unchecked = result.success  # a tool step's result is its checked tool call's: walked once, not twice
    for call in result.tool_calls:
        if was_checked(call):
            unchecked = unchecked and call.result is not result.result
        elif (
            json_problem(call.arguments) is not None
            or (call.result is not None and json_problem(call.result) is not None)
            or (call.error is not None and json_problem(call.error) is not None)
        ):
            return _unusable(result)
    if (unchecked and json_problem(result.result) is not None) or result.repaired_step is not None:
        return _unusable(result)  # a repaired step (rare) is checked on the slow path
    return result


def _unusable(result: StepExecutionResult) -> StepExecutionResult:
    """The slow path of :func:`_usable`: find what is wrong, and keep only what is JSON data."""
    problem = json_problem(result.result) if result.success else None
    if problem is not None:
        problem = f"the step's result is not JSON data: {problem}"
    trusted = result.result if result.success and problem is None else _NOTHING
    calls = tuple(_usable_call(call, trusted) for call in result.tool_calls)
    for kept, given in zip(calls, result.tool_calls, strict=True):
        if problem is None and kept is not given and kept.error is not None:
            problem = str(kept.error["message"])
    if problem is None and result.repaired_step is not None:
        try:
            found = json_problem(result.repaired_step.model_dump())
        except Exception as exc:
            found = f"it cannot be read: {type(exc).__name__}"
        if found is not None:
            problem = f"the repaired step is not JSON data: {found}"
    if problem is None:
        return result
    return StepExecutionResult(
        success=False, error=safe_text(problem), execution_mode=result.execution_mode, tool_calls=calls
    )


def _call_problem(call: ToolCall, trusted: Any) -> tuple[str, str] | None:
    """Which part of a tool call record is not JSON data, and what is wrong with it."""
    for part, value in (("arguments", call.arguments), ("result", call.result), ("error", call.error)):
        if value is not None and value is not trusted and (found := json_problem(value)) is not None:
            return part, found
    return None


_NOTHING: Final = object()


def _usable_call(call: ToolCall, trusted: Any) -> ToolCall:
    found = _call_problem(call, trusted)
    if found is None:
        return call
    part, problem = found
    message = f"the {part} of this {safe_text(call.tool_name)} call is not JSON data: {problem}"
    return call.model_copy(
        update={
            "arguments": {} if part == "arguments" else call.arguments,
            "result": None,
            "error": {"type": "ValidationError", "message": safe_text(message)},
        }
    )
