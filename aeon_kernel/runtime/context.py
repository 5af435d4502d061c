"""What a scheduler sees of its run: the working state, the shared components, the hooks, and the open cycle.

Everything per run lives here or in :class:`~aeon_kernel.runtime.state.RunState`, never on the components, so
several runs can share one engine's model, memory and tools at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aeon_kernel.contracts import ConvergenceEngine, Memory, Planner, Supervisor, Validator
from aeon_kernel.errors import AeonError
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.models import Check, Phase, Plan, SupervisorAction, ToolCall
from aeon_kernel.runtime.state import RunState
from aeon_kernel.secrets import scrub_secrets_data
from aeon_kernel.tools import ToolRegistry

log = logging.getLogger("aeon")


class Hooks(Protocol):
    """How the runtime calls hooks; :class:`aeon_kernel.plugins.AeonPluginManager` is one."""

    def caller(self, hook_name: str) -> Callable[..., Any]: ...

    def each(self, hook_name: str) -> tuple[tuple[str, Callable[..., Any]], ...]: ...

    def listens(self, hook_name: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Components:
    """The components a run works with: built once (by the engine, from ``aeon.toml``) and shared by its runs."""

    llm: ModelClient
    memory: Memory
    tools: ToolRegistry
    supervisor: Supervisor
    validator: Validator
    planner: Planner
    convergence: ConvergenceEngine | None = None
    max_tokens: int = 512
    temperature: float = 0.0


def error_record(exc: BaseException, step_id: str | None = None, **extra: Any) -> dict[str, Any]:
    """A JSON-ready error record, for the log and for the next prompt (FR-055); scrubbed of every secret."""
    base = exc.to_dict() if isinstance(exc, AeonError) else {"type": type(exc).__name__, "message": str(exc)}
    record: dict[str, Any] = scrub_secrets_data({**base, "step_id": step_id, **extra})
    return record


class Deferred(dict[str, Any]):
    """An event's arguments as an observer gets them where no hook needs them yet: each is made when first read
    (a state snapshot costs a few µs a cycle, and a stream reads it only when the plan may have changed)."""

    def __init__(self, **makers: Callable[[], Any]) -> None:
        super().__init__()
        self._makers = makers

    def __missing__(self, key: str) -> Any:
        value = self[key] = self._makers[key]()
        return value


class Cycle:
    """What one cycle gathers before it becomes a LogEntry."""

    __slots__ = (
        "actions",
        "checks",
        "errors",
        "phase",
        "plan_state",
        "stages",
        "started",
        "step_id",
        "tool_calls",
    )

    def __init__(self, plan: Plan | None) -> None:
        self.started = time.perf_counter()
        self.plan_state = plan  # the snapshot at cycle start (FR-038)
        self.phase: Phase = "plan" if plan is None else "step"
        self.step_id: str | None = None
        self.actions: list[SupervisorAction] = []
        self.checks: list[Check] = []
        self.tool_calls: list[ToolCall] = []
        self.errors: list[dict[str, Any]] = []
        self.stages: list[dict[str, Any]] = []


class RunContext:
    """One run as its scheduler sees it."""

    __slots__ = ("components", "cycle", "hooks", "observer", "output_schema", "state", "telemetry_errors")

    def __init__(
        self,
        state: RunState,
        components: Components,
        hooks: Hooks,
        *,
        output_schema: dict[str, Any] | None = None,
    ) -> None:
        self.state = state
        self.components = components
        self.hooks = hooks
        #: the JSON Schema the run's typed output must match (its manifest's), or None: no typed output asked
        self.output_schema = output_schema
        #: what hears every event this run emits besides the hooks: its stream (:mod:`aeon_kernel.runtime.stream`)
        self.observer: Callable[[str, dict[str, Any]], None] | None = None
        #: the cycle in progress (None between cycles)
        self.cycle: Cycle | None = None
        #: event hooks that raised, this run (a failing sink never breaks a run)
        self.telemetry_errors: list[dict[str, Any]] = []

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def listens(self, hook_name: str) -> bool:
        """Whether an event would be heard (a plugin implements its hook, or the run is streamed): an event nobody
        hears is not built."""
        return self.observer is not None or self.hooks.listens(hook_name)

    def emit(self, hook_name: str, **kwargs: Any) -> None:
        """Call an event hook on every implementation; a failing sink is reported, and the others still get it.
        Then the run's observer, if it is streamed."""
        for plugin, call in self.hooks.each(hook_name):
            try:
                call(**kwargs)
            except (
                Exception,
                SystemExit,
            ) as exc:  # a sink calling sys.exit does not end the run; Ctrl-C does
                log.warning(
                    "telemetry hook %s of %s failed: %s: %s", hook_name, plugin, type(exc).__name__, exc
                )
                self.telemetry_errors.append(error_record(exc, hook=hook_name, plugin=plugin))
        if self.observer is not None:
            self.observer(hook_name, kwargs)

    def record_action(self, action: SupervisorAction | Check) -> None:
        """Supervisors report every attempt here, and components every check they ran (:meth:`record_check`); it
        lands in the cycle's log line and in the state."""
        if isinstance(action, Check):
            self.record_check(action)
            return
        if self.cycle is not None:
            self.cycle.actions.append(action)
        self.emit("aeon_supervisor_action", run_id=self.state.run_id, action=action)

    def record_check(self, check: Check) -> None:
        """A check of the plan, a tool call or an answer (:mod:`aeon_kernel.verification`): into this cycle's log
        line and the state; outside a cycle (the run's end), straight into the state."""
        if self.cycle is not None:
            self.cycle.checks.append(check)
        else:
            self.state.checks.append(check)
            self.state.changed()

    def record_tool_calls(self, calls: tuple[ToolCall, ...]) -> None:
        """Tool calls made in this cycle: into its log line, and to ``aeon_tool_called``."""
        if self.cycle is not None:
            self.cycle.tool_calls.extend(calls)
        if calls and self.listens("aeon_tool_called"):
            for call in calls:
                self.emit("aeon_tool_called", run_id=self.state.run_id, call=call)

    def record_stage(self, record: dict[str, Any]) -> None:
        """A flow stage's history record (spec 004 §6): into this cycle's log entry, and so the store and the log."""
        if self.cycle is not None:
            self.cycle.stages.append(record)

    def record_error(self, error: dict[str, Any]) -> None:
        """An error outside any step (convergence, the state store): into the state's error history."""
        self.state.record_error(error)

    def fail_cycle(self, error: dict[str, Any]) -> None:
        """An error of this cycle: into its log line (and, when the cycle ends, the state's history)."""
        if self.cycle is not None:
            self.cycle.errors.append(error)
