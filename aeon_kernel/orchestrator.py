"""The kernel loop (spec 000 FR-001…055): plan → step → step … until the plan is done or the TTL runs out.

A run is an iterator of cycles (``Orchestrator.iter``) that ``execute`` simply drains, so an embedder, the CLI's
live view or a test can step through it. A cycle is one unit of work — generating the plan, or executing the
next step — and ends with exactly one log record, emitted from ``finally`` so failing cycles are logged too
(FR-039). Every cycle spends one unit of TTL (FR-035). Nothing raised inside a cycle escapes as a bare
exception: it becomes an error in the log and, where the spec says so, a structured failed result (FR-049).
This is the primary kernel module; spec SC-008 caps it at 800 lines.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any, Final

from aeon_kernel.contracts import ConvergenceEngine, LLMAdapter, Memory, Supervisor, Validator
from aeon_kernel.errors import AeonError, LLMError, OrchestrationError, SupervisorError, ValidationError
from aeon_kernel.executor import StepContext, memory_key
from aeon_kernel.llm import ModelClient, total_usage
from aeon_kernel.models import (
    ConvergenceAssessment,
    LogEntry,
    OrchestrationState,
    Plan,
    PlanStep,
    RunStatus,
    StepExecutionResult,
    StepStatus,
    SupervisorAction,
    ToolCall,
    utc_now,
)
from aeon_kernel.output import ensure_no_new_tools, parse_json
from aeon_kernel.plugins import AeonPluginManager, build_plugin_manager, loaded_plugins
from aeon_kernel.prompts import SYSTEM_PROMPT, plan_prompt, plan_schema
from aeon_kernel.registry import ToolRegistry
from aeon_kernel.run_state import RunState
from aeon_kernel.state_store import StateStore, StoredRun

log = logging.getLogger("aeon")

DEFAULT_TTL: Final = 50


def _error(exc: BaseException, step_id: str | None = None, **extra: Any) -> dict[str, Any]:
    """A JSON-ready error record, for the log and for the next prompt (FR-055)."""
    base = exc.to_dict() if isinstance(exc, AeonError) else {"type": type(exc).__name__, "message": str(exc)}
    return {**base, "step_id": step_id, **extra}


class _Cycle:
    """What one cycle gathers before it becomes a LogEntry."""

    __slots__ = ("actions", "errors", "phase", "plan_state", "started", "step_id", "tool_calls")

    def __init__(self, plan: Plan | None) -> None:
        self.started = time.perf_counter()
        self.plan_state = plan  # the snapshot at cycle start (FR-038)
        self.phase: Any = "plan" if plan is None else "step"
        self.step_id: str | None = None
        self.actions: list[SupervisorAction] = []
        self.tool_calls: list[ToolCall] = []
        self.errors: list[dict[str, Any]] = []


class Orchestrator:
    """The main orchestration kernel (spec 002).

    :param llm_adapter: the model; wrapped with the kernel's retry policy unless it already is a ModelClient.
    :param memory: where step results are written and read back.
    :param tool_registry: the tools steps may call.
    :param supervisor: repairs malformed output; give it the same ModelClient (``Engine`` does) so its calls
        are retried and counted in the cycle's log line.
    :param validator: checks plans, outputs and tool calls.
    :param ttl: maximum number of cycles (FR-034).
    :param convergence: decides, when the plan is finished, whether the run reached its answer.
    :param plugin_manager: hooks for step execution and telemetry; a bare kernel-only manager when omitted.
    :param state_store: when given, every cycle is committed to it before it is logged, and interrupted runs
        can be continued with :meth:`resume` (FR-013).
    """

    def __init__(
        self,
        llm_adapter: LLMAdapter,
        memory: Memory,
        tool_registry: ToolRegistry,
        supervisor: Supervisor,
        validator: Validator,
        ttl: int = DEFAULT_TTL,
        *,
        convergence: ConvergenceEngine | None = None,
        plugin_manager: AeonPluginManager | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        manifest: dict[str, Any] | None = None,
        state_store: StateStore | None = None,
    ) -> None:
        if ttl < 1:
            raise ValueError(f"ttl must be at least 1, got {ttl}")
        self.llm = llm_adapter if isinstance(llm_adapter, ModelClient) else ModelClient(llm_adapter)
        self.memory = memory
        self.tools = tool_registry
        self.supervisor = supervisor
        self.validator = validator
        self.ttl = ttl
        self.convergence = convergence
        self.pm = plugin_manager if plugin_manager is not None else build_plugin_manager(autoload=False)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.manifest = manifest
        self.state_store = state_store
        self._run_state: RunState | None = None
        self._cycle: _Cycle | None = None
        self._running = False
        self._fatal = False
        self.result: dict[str, Any] | None = None
        self.telemetry_errors: list[dict[str, Any]] = []

    # --- public API --------------------------------------------------------------------------------------------

    def execute(self, user_request: str, initial_plan: Plan | dict[str, Any] | None = None) -> dict[str, Any]:
        """Run the loop to the end and return ``plan``, ``status``, ``final_state`` (and ``answer``, ``errors``).

        ``status`` is ``completed`` (every step complete and the convergence engine agrees), ``failed``, or
        ``ttl_expired`` (the state is kept: FR-036).
        """
        for _ in self.iter(user_request, initial_plan):
            pass
        assert self.result is not None
        return self.result

    def get_state(self) -> OrchestrationState:
        """The current state snapshot (immutable; safe to keep)."""
        return self._run.snapshot()

    @property
    def _run(self) -> RunState:
        """The run in progress (the loop's working copy of the state)."""
        if self._run_state is None:
            raise OrchestrationError("no run has started yet: call execute() or iter() first")
        return self._run_state

    def iter(
        self, user_request: str, initial_plan: Plan | dict[str, Any] | None = None
    ) -> Iterator[LogEntry]:
        """Run the loop one cycle at a time, yielding each cycle's log record as soon as it is written.

        The final result is in ``self.result`` once the iterator is exhausted.
        """
        if not isinstance(user_request, str) or not user_request.strip():
            raise ValidationError("the request must be a non-empty string")
        plan = self._initial_plan(initial_plan)
        nxt = (plan.running_step() or plan.next_pending()) if plan is not None else None
        state = OrchestrationState(
            run_id=uuid.uuid4().hex,
            request=user_request,
            plan=plan,
            current_step_id=nxt.step_id if nxt else None,
            ttl_remaining=self.ttl,
        )
        yield from self._drive(state, resumed=None)

    def resume(self, run_id: str) -> Iterator[LogEntry]:
        """Continue an interrupted run from its state store, one cycle at a time (like :meth:`iter`).

        Completed steps are never executed again; a step that was running when the process died is executed
        again with the same idempotency key; the TTL continues from what was left. A finished, corrupt or
        unknown run, or one another live process holds, raises ``RunStoreError`` — never a silent fresh start.
        """
        if self.state_store is None:
            raise OrchestrationError('resuming needs a state store: set [state] use = "sqlite" in aeon.toml')
        stored = self.state_store.load(run_id)
        self.state_store.claim(run_id)
        yield from self._drive(stored.state, resumed=stored)

    def _drive(self, state: OrchestrationState, resumed: StoredRun | None) -> Iterator[LogEntry]:
        if self._running:
            raise OrchestrationError(
                "this orchestrator is already running; use one orchestrator per run at a time"
            )
        self._running, self._fatal, self.result = True, False, None
        self._run_state = RunState(state)
        run_id = state.run_id
        manifest = {**(self.manifest or self._default_manifest()), "run_id": run_id, "started": utc_now()}
        try:
            if resumed is None:
                if self.state_store is not None:
                    self.state_store.create_run(state, manifest)
            else:
                manifest["resumed_at_cycle"] = state.cycle
                self._restore_memory(state)
                self._emit("aeon_run_resumed", run_id=run_id, state=state, entries=resumed.entries)
            self._emit("aeon_run_start", run_id=run_id, request=state.request, state=state, manifest=manifest)
            status, assessment = self._status()
            while status is None:
                yield self._run_cycle()
                status, assessment = self._status()
            self._finish(status, assessment)
        finally:
            self._running = False
            if self.result is None and self.state_store is not None:
                self.state_store.release(run_id)  # interrupted: stays resumable

    def _restore_memory(self, state: OrchestrationState) -> None:
        """A resumed run may have a fresh memory: put back what completed steps stored (read by later prompts)."""
        for step in state.plan.steps if state.plan else ():
            key = memory_key(state.run_id, step.step_id)
            if step.status is StepStatus.COMPLETE and self.memory.read(key) is None:
                self.memory.write(key, step.result)

    # --- the loop ----------------------------------------------------------------------------------------------

    def _default_manifest(self) -> dict[str, Any]:
        """What produced a run, when no Engine supplied the manifest (issue: run manifest)."""
        from aeon_kernel import __version__
        from aeon_kernel.hookspecs import HOOKSPEC_VERSION

        return {
            "aeon_version": __version__,
            "hookspec_version": HOOKSPEC_VERSION,
            "plugins": loaded_plugins(self.pm),
            "config_fingerprint": None,
            "model": self.llm.model_id,
        }

    def _initial_plan(self, initial_plan: Plan | dict[str, Any] | None) -> Plan | None:
        if initial_plan is None or isinstance(initial_plan, Plan):
            return initial_plan
        self.validator.validate_plan(initial_plan)
        return Plan.model_validate(initial_plan)

    def _status(self) -> tuple[RunStatus | None, ConvergenceAssessment | None]:
        """Decide whether the run is over: a fatal error or no plan (FR-049), plan finished (FR-004), TTL (FR-005)."""
        run = self._run
        if self._fatal or (run.goal is None and run.cycle > 0):
            return "failed", None
        if run.goal is not None and run.current_step_id is None:
            assessment = self._assess(run.plan())  # type: ignore[arg-type]
            return ("completed" if run.all_complete() and assessment.converged else "failed"), assessment
        if run.ttl_remaining <= 0:
            return "ttl_expired", None
        return None, None

    def _assess(self, plan: Plan) -> ConvergenceAssessment:
        """Ask the convergence engine; without one, a finished plan has converged."""
        if self.convergence is None:
            return ConvergenceAssessment(
                converged=plan.is_finished, completeness_score=1.0 if plan.is_finished else 0
            )
        results = [{"step_id": s.step_id, "status": s.status.value, "result": s.result} for s in plan.steps]
        try:
            return self.convergence.assess(plan.model_dump(mode="json"), results)
        except Exception as exc:
            self._run.record_error(_error(exc, phase="convergence"))
            return ConvergenceAssessment(converged=False, reason_codes=("convergence_error",))

    def _run_cycle(self) -> LogEntry:
        """One cycle: generate the plan or execute the next step; always ends with one log record."""
        run = self._run
        cycle = self._cycle = _Cycle(run.plan())
        try:
            if cycle.plan_state is None:
                self._generate_plan(run.request)
            else:
                self._execute_next_step(cycle)
        except Exception as exc:
            # Nothing escapes a cycle: the step fails (FR-054) and the error is logged (FR-039). A model that
            # stays unavailable ends the run with a structured error (FR-049).
            if not isinstance(exc, AeonError):
                log.exception("unexpected error in cycle %d", run.cycle + 1)
            self._fail_running_step(f"{type(exc).__name__}: {exc}")
            cycle.errors.append(_error(exc, cycle.step_id, phase=cycle.phase))
            self._fatal = isinstance(exc, LLMError)
        finally:
            entry = self._close_cycle(cycle)
        return entry

    def _close_cycle(self, cycle: _Cycle) -> LogEntry:
        calls = self.llm.drain()
        run = self._run
        run.end_cycle(cycle.tool_calls, calls, cycle.actions, cycle.errors)
        step = run.step(cycle.step_id) if run.goal is not None and cycle.step_id else None
        # Built without re-validation: every part is already a validated kernel object (pydantic would
        # otherwise re-run the plan's validators on each cycle).
        entry = LogEntry.trusted(
            step_number=run.cycle,
            plan_state=cycle.plan_state,
            llm_output=calls[0] if calls else {},
            supervisor_actions=tuple(cycle.actions),
            tool_calls=tuple(cycle.tool_calls),
            ttl_remaining=run.ttl_remaining,
            errors=tuple(cycle.errors),
            timestamp=utc_now(),
            run_id=run.run_id,
            phase=cycle.phase,
            step_id=cycle.step_id,
            step_status=step.status if step else None,
            usage=total_usage(calls),
            duration_ms=round((time.perf_counter() - cycle.started) * 1000, 3),
        )
        self._cycle = None
        if self.state_store is not None:
            entry = self._commit(run.snapshot(), entry, calls)
        if self.pm.listens("aeon_cycle_end"):
            self._emit("aeon_cycle_end", entry=entry, state=run.snapshot())
        return entry

    def _commit(self, state: OrchestrationState, entry: LogEntry, calls: list[dict[str, Any]]) -> LogEntry:
        """Store the cycle before it is logged; a store that fails ends the run, and the log says why."""
        assert self.state_store is not None
        try:
            self.state_store.commit_cycle(state, entry, calls)
        except Exception as exc:
            log.error("the state store failed: %s: %s", type(exc).__name__, exc)
            error = _error(exc, entry.step_id, phase="state_store")
            self._run.record_error(error)
            self._fatal = True
            return entry.model_copy(update={"errors": (*entry.errors, error)})
        return entry

    def _generate_plan(self, request: str) -> None:
        """FR-006/010: the model writes the plan; it is parsed, validated and, when malformed, repaired."""
        tools = self.tools.export_tools_for_llm()
        text = self.llm.generate(
            plan_prompt(request, tools),
            SYSTEM_PROMPT,
            self.max_tokens,
            self.temperature,
            json_schema=plan_schema(tools),
        )["text"]
        value = parse_json(text, self.supervisor, self._record_action)
        try:
            self.validator.validate_plan(value)
        except ValidationError:
            repaired = self.supervisor.repair_plan(value, record=self._record_action)
            ensure_no_new_tools(value, repaired)
            try:
                self.validator.validate_plan(repaired)
            except ValidationError as exc:
                raise SupervisorError(
                    f"the repaired plan is still invalid: {exc}", last_error=str(exc)
                ) from None
            value = repaired
        # A new plan starts with every step pending (spec 001), whatever statuses the model wrote.
        plan = Plan.model_validate(value)
        fresh = tuple(
            s.model_copy(update={"status": StepStatus.PENDING, "errors": (), "result": None, "failure": None})
            for s in plan.steps
        )
        self._run.start_plan(plan.model_copy(update={"steps": fresh}))

    def _execute_next_step(self, cycle: _Cycle) -> None:
        """FR-052: start the next pending step, execute it through the hook, record complete or failed."""
        run = self._run
        assert run.current_step_id is not None, "the loop only runs a step cycle while a step is left"
        step = run.step(run.current_step_id)
        cycle.step_id = step.step_id
        if step.status is StepStatus.PENDING:  # a running step is one a crashed process left: run it again
            step = self._transition(step.step_id, StepStatus.RUNNING)
        context = StepContext(
            run_id=run.run_id,
            snapshot=run.snapshot,
            tools=self.tools,
            memory=self.memory,
            llm=self.llm,
            supervisor=self.supervisor,
            validator=self.validator,
            record=self._record_action,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        try:
            result = self.pm.caller("aeon_execute_step")(step=step, context=context)
        except (LLMError, SupervisorError):
            raise
        except Exception as exc:
            # FR-054: a failing step is marked failed and the run goes on.
            result = StepExecutionResult(
                success=False, error=f"{type(exc).__name__}: {exc}", execution_mode="tool"
            )
        if not isinstance(result, StepExecutionResult):
            result = StepExecutionResult(
                success=False, error="no step executor returned a StepExecutionResult", execution_mode="tool"
            )
        self._apply(step, result, cycle)

    def _apply(self, step: PlanStep, result: StepExecutionResult, cycle: _Cycle) -> None:
        """Write a step's outcome into the state: tool calls, repaired step, and its final status."""
        cycle.tool_calls.extend(result.tool_calls)
        if self.pm.listens("aeon_tool_called"):
            for call in result.tool_calls:
                self._emit("aeon_tool_called", run_id=self._run.run_id, call=call)
        if result.repaired_step is not None:
            self._run.replace_step(
                result.repaired_step.model_copy(update={"status": StepStatus.RUNNING, "errors": ()})
            )
        if result.success:
            self._transition(step.step_id, StepStatus.COMPLETE, result=_jsonable(result.result))
        else:
            message = result.error or "the step failed"
            cycle.errors.append({"type": "StepFailed", "message": message, "step_id": step.step_id})
            self._transition(step.step_id, StepStatus.FAILED, failure=message)

    def _fail_running_step(self, message: str) -> None:
        run = self._run
        step_id = run.current_step_id
        if run.goal is not None and step_id is not None and run.step(step_id).status is StepStatus.RUNNING:
            self._transition(step_id, StepStatus.FAILED, failure=message)

    def _transition(
        self, step_id: str, status: StepStatus, *, result: Any = None, failure: str | None = None
    ) -> PlanStep:
        step, previous = self._run.transition(step_id, status, result=result, failure=failure)
        if self.pm.listens("aeon_step_status_changed"):
            self._emit("aeon_step_status_changed", run_id=self._run.run_id, step=step, previous=previous)
        return step

    def _record_action(self, action: SupervisorAction) -> None:
        """Supervisors report every attempt here; it lands in the cycle's log line and in the state."""
        if self._cycle is not None:
            self._cycle.actions.append(action)
        self._emit("aeon_supervisor_action", run_id=self._run.run_id, action=action)

    def _finish(self, status: RunStatus, assessment: ConvergenceAssessment | None) -> None:
        self._run.finish(status)
        state = self._run.snapshot()
        final_state = state.model_dump(mode="json")
        self.result = {
            "run_id": state.run_id,
            "status": status,
            "plan": final_state["plan"],  # the same data as final_state's: dumped once
            "answer": _answer(state.plan),
            "errors": list(state.errors),
            "message": _message(state, status),
            "convergence": assessment.model_dump(mode="json") if assessment else None,
            "final_state": final_state,
        }
        if self.state_store is not None:
            try:
                self.state_store.finish_run(state, self.result)
            except Exception as exc:
                log.error("the state store could not record the end of run %s: %s", state.run_id, exc)
                self.result["errors"].append(_error(exc, phase="state_store"))
        self._emit("aeon_run_end", run_id=state.run_id, result=self.result)

    def _emit(self, hook_name: str, **kwargs: Any) -> None:
        """Call an event hook; a failing sink is reported, never allowed to break the run."""
        try:
            self.pm.caller(hook_name)(**kwargs)
        except Exception as exc:
            log.warning("telemetry hook %s failed: %s: %s", hook_name, type(exc).__name__, exc)
            self.telemetry_errors.append(_error(exc, hook=hook_name))


def _answer(plan: Plan | None) -> Any:
    """The run's answer: the result of the last step that completed."""
    if plan is None:
        return None
    done = [s for s in plan.steps if s.status is StepStatus.COMPLETE]
    return done[-1].result if done else None


def _message(state: OrchestrationState, status: RunStatus) -> str:
    if status == "completed":
        return "every step completed"
    if status == "ttl_expired":
        pending = [s.step_id for s in state.plan.steps if not s.status.is_terminal] if state.plan else []
        return (
            f"TTL expired after {state.cycle} cycles with steps {pending} unfinished; "
            "the state is kept in final_state. Raise the TTL (--ttl, or [run] ttl in aeon.toml) to let it finish."
        )
    if state.plan is None:
        return "no usable plan: " + (state.errors[-1]["message"] if state.errors else "unknown error")
    failed = [s.step_id for s in state.plan.steps if s.status is StepStatus.FAILED]
    if failed:
        return f"steps {failed} failed; see errors"
    return state.errors[-1]["message"] if state.errors else "the run did not converge"


_SCALARS: Final = (str, int, float, bool, type(None))


def _jsonable(value: Any) -> Any:
    """Step results are stored in the plan, which is pure JSON data (FR-009)."""
    if isinstance(value, _SCALARS) or (
        type(value) is dict and all(type(k) is str and isinstance(v, _SCALARS) for k, v in value.items())
    ):
        return value  # the usual result, a flat object: no need to encode it to know
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
