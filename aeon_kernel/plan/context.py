"""StepContext: what a step executor (an ``aeon_execute_step`` implementation) may use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aeon_kernel.contracts import Memory, RecordAction, Supervisor, Validator
from aeon_kernel.invocation import ToolContext
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.llm.prompts import state_summary
from aeon_kernel.models import OrchestrationState, ToolCall, utc_now
from aeon_kernel.schemas import schema_errors
from aeon_kernel.tools import Tool, ToolRegistry


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
    #: the ``aeon_invoke_tool`` hook; call tools through :meth:`call_tool`
    invoke: Callable[..., Any]
    max_tokens: int = 512
    temperature: float = 0.0

    @property
    def state(self) -> OrchestrationState:
        """The run's state as the step starts (the step itself is ``running``)."""
        return self.snapshot()

    def memory_key(self, step_id: str) -> str:
        return memory_key(self.run_id, step_id)

    def call_tool(self, tool: Tool, arguments: dict[str, Any], step_id: str) -> ToolCall:
        """Invoke ``tool`` through the ``aeon_invoke_tool`` hook (policies, sandboxes and timers see every call)."""
        call = self.invoke(tool=tool, arguments=arguments, context=ToolContext(self.run_id, step_id))
        if not isinstance(call, ToolCall):
            return _refused(tool, arguments, step_id, f"got {type(call).__name__} instead of a ToolCall")
        if call.error is not None:
            return call
        if call.result is None:
            return _refused(tool, arguments, step_id, "the ToolCall has neither a result nor an error")
        # Whoever produced the record (a plugin may replace the kernel's), its result must match the schema.
        problems = schema_errors(tool.output_schema, call.result)
        if problems:
            return _refused(tool, arguments, step_id, f"{tool.name} result invalid: " + "; ".join(problems))
        return call

    def summary(self) -> str:
        """FR-002: goal, earlier results (read back from memory, FR-018), errors, and TTL, for the next prompt."""
        prefix = self.memory_key("")
        results = [(key[len(prefix) :], value) for key, value in self.memory.search(prefix)]
        state = self.state
        goal = state.plan.goal if state.plan else state.request
        return state_summary(goal, results, list(state.errors), state.ttl_remaining)


def _refused(tool: Tool, arguments: dict[str, Any], step_id: str, why: str) -> ToolCall:
    """The record of a tool call whose ``aeon_invoke_tool`` answer cannot be used."""
    return ToolCall(
        tool_name=tool.name,
        arguments=arguments,
        step_id=step_id,
        error={"type": "ValidationError", "message": f"{tool.name}: unusable aeon_invoke_tool record: {why}"},
        timestamp=utc_now(),
    )
