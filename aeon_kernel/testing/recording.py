"""A telemetry sink that remembers every event, for assertions in tests."""

from __future__ import annotations

from typing import Any

from aeon_kernel import (
    LogEntry,
    OrchestrationState,
    PlanStep,
    StepStatus,
    SupervisorAction,
    TelemetrySink,
    ToolCall,
    hookimpl,
)


class RecordingSink(TelemetrySink):
    """Records every event hook call, in order, as ``(hook name, payload)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.manifest: dict[str, Any] | None = None
        self.closed = False

    def of(self, name: str) -> list[Any]:
        """The payloads of one hook, in order (``of("aeon_cycle_end")`` gives the LogEntry records)."""
        return [payload for hook, payload in self.events if hook == name]

    @property
    def entries(self) -> list[LogEntry]:
        return self.of("aeon_cycle_end")

    @hookimpl
    def aeon_run_start(
        self, run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
    ) -> None:
        self.manifest = manifest
        self.events.append(("aeon_run_start", state))

    @hookimpl
    def aeon_run_resumed(self, run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None:
        self.events.append(("aeon_run_resumed", entries))

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        self.events.append(("aeon_cycle_end", entry))

    @hookimpl
    def aeon_step_status_changed(self, run_id: str, step: PlanStep, previous: StepStatus) -> None:
        self.events.append(("aeon_step_status_changed", (step.step_id, previous, step.status)))

    @hookimpl
    def aeon_tool_called(self, run_id: str, call: ToolCall) -> None:
        self.events.append(("aeon_tool_called", call))

    @hookimpl
    def aeon_model_called(self, run_id: str, cycle: int, call: dict[str, Any]) -> None:
        self.events.append(("aeon_model_called", call))

    @hookimpl
    def aeon_supervisor_action(self, run_id: str, action: SupervisorAction) -> None:
        self.events.append(("aeon_supervisor_action", action))

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
        self.events.append(("aeon_run_end", result))

    def close(self) -> None:
        self.closed = True
