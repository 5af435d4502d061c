"""StepContext: what a step executor (an ``aeon_execute_step`` implementation) may use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aeon_kernel.contracts import Memory, Planner, RecordAction, Supervisor, Validator
from aeon_kernel.invocation import REDACTED, ToolContext, checked, redacted
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.models import OrchestrationState, ToolCall
from aeon_kernel.tools import Tool, ToolRegistry


def memory_key(run_id: str, step_id: str) -> str:
    """Where a step's result lives in memory: ``run/<run_id>/<step_id>``."""
    return f"run/{run_id}/{step_id}"


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step may use: the run's components and, through ``state``, an immutable snapshot of its state.

    Nothing in it is about one step, so a run builds one and hands it to each of its steps; it is frozen so no
    step can change what the next one sees. The snapshot is built only when a step asks for ``state`` (most tool
    steps never do), and is the state as that step starts.
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
    #: the planner that wrote the plan: it judges the model's answers to its steps (``Planner.answer_problem``)
    planner: Planner | None = None
    #: the JSON Schema the run's typed output must match (``RunContext.output_schema``), or None
    output_schema: dict[str, Any] | None = None
    #: the ``aeon_tool_started`` hook (a no-op while nobody implements it)
    tool_started: Callable[..., Any] | None = None

    @property
    def state(self) -> OrchestrationState:
        """The run's state as the step starts (the step itself is ``running``)."""
        return self.snapshot()

    def memory_key(self, step_id: str) -> str:
        return memory_key(self.run_id, step_id)

    def call_tool(self, tool: Tool, arguments: dict[str, Any], step_id: str) -> ToolCall:
        """Invoke ``tool`` through the ``aeon_invoke_tool`` hook (policies, sandboxes and timers see every call).

        The record comes back with the tool's sensitive arguments and results redacted: it becomes the step's
        result, memory and history, none of which may keep a secret."""
        if self.tool_started is not None:
            shown = {k: REDACTED if k in tool.sensitive_arguments else v for k, v in arguments.items()}
            self.tool_started(run_id=self.run_id, step_id=step_id, tool_name=tool.name, arguments=shown)
        call = self.invoke(tool=tool, arguments=arguments, context=ToolContext(self.run_id, step_id))
        return redacted(tool, checked(tool, arguments, step_id, call))

    def results(self) -> dict[str, Any]:
        """The results of this run's steps so far, by step id, read back from memory (FR-018): what the next
        prompt summarises (FR-002)."""
        prefix = self.memory_key("")
        return {key[len(prefix) :]: value for key, value in self.memory.search(prefix)}
