"""What a streamed run yields (issue 28): one typed event per thing that happened, in the order it happened.

Each event is made from the hook the kernel already calls for it (``aeon_run_start``, ``aeon_step_status_changed``,
``aeon_tool_called``, ``aeon_supervisor_action``, ``aeon_pass_event``, ``aeon_cycle_end``, ``aeon_run_end``), so a
streamed run says exactly what a sink hears; ``TextDelta`` is the model's reply as it is written (adapters that can
stream: ``LLMAdapter.supports_streaming()``). ``to_dict()`` is each event as JSON, with its ``type``; the
``CycleEnded`` events' entries are the run's JSONL records, and ``RunFinished`` carries the result dict. Events are
records: read them, don't change them (they are plain slotted dataclasses, not frozen ones, which cost three times
as much to make: a streamed run makes several a cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from aeon_kernel.models import LogEntry, Plan, PlanStep, SupervisorAction, ToolCall


@dataclass(slots=True)
class RunEvent:
    """Something that happened in run ``run_id``."""

    type: ClassVar[str] = "event"
    run_id: str

    def summary(self) -> str:
        """A line for a person (a progress message, a log)."""
        return self.type.replace("_", " ")

    def to_dict(self) -> dict[str, Any]:
        """The event as JSON data, with its ``type``."""
        data: dict[str, Any] = {"type": self.type}
        for item in fields(self):
            value = getattr(self, item.name)
            data[item.name] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
        return data


@dataclass(slots=True)
class RunStarted(RunEvent):
    """The run began (or went on from its store: ``resumed``); ``manifest`` is what produced it."""

    type: ClassVar[str] = "run_started"
    request: str
    manifest: dict[str, Any]
    resumed: bool = False


@dataclass(slots=True)
class PlanAccepted(RunEvent):
    """The plan the run will follow, checked (its steps pending)."""

    type: ClassVar[str] = "plan_accepted"
    plan: Plan

    def summary(self) -> str:
        return f"plan: {self.plan.goal} ({len(self.plan.steps)} steps)"


@dataclass(slots=True)
class StepStarted(RunEvent):
    type: ClassVar[str] = "step_started"
    step: PlanStep

    def summary(self) -> str:
        return f"step {self.step.step_id} started: {self.step.description}"


@dataclass(slots=True)
class ToolStarted(RunEvent):
    """A tool is being called (policies judge it next); ``ToolReturned`` follows with how it went."""

    type: ClassVar[str] = "tool_started"
    step_id: str | None
    tool_name: str
    arguments: dict[str, Any]

    def summary(self) -> str:
        return f"step {self.step_id}: calling {self.tool_name}"


@dataclass(slots=True)
class ToolReturned(RunEvent):
    """A tool call ended: its record, result or error (secrets redacted), as the log keeps it."""

    type: ClassVar[str] = "tool_returned"
    call: ToolCall

    def summary(self) -> str:
        how = "failed" if self.call.error is not None else "returned"
        return f"step {self.call.step_id}: {self.call.tool_name} {how}"


@dataclass(slots=True)
class TextDelta(RunEvent):
    """A new piece of the model's reply, as it writes it; ``attempt`` grows when a failed call is retried (the text
    then starts over). ``step_id`` is the step being worked on (None while the plan is written)."""

    type: ClassVar[str] = "text_delta"
    step_id: str | None
    text: str
    attempt: int = 1

    def summary(self) -> str:
        return self.text


@dataclass(slots=True)
class StepFinished(RunEvent):
    """A step completed, failed, or was found blocked (``invalid``, multi-pass: it finishes again once a
    refinement runs it again or fails it), with its result or why it failed (``step.status``)."""

    type: ClassVar[str] = "step_finished"
    step: PlanStep

    def summary(self) -> str:
        return f"step {self.step.step_id} {self.step.status.value}"


@dataclass(slots=True)
class Repair(RunEvent):
    """The supervisor tried to repair a model output (``action.error`` is None when it succeeded)."""

    type: ClassVar[str] = "repair"
    action: SupervisorAction


@dataclass(slots=True)
class PassEvent(RunEvent):
    """A multi-pass run's pass or stage event (spec 003): ``event`` names it, ``record`` holds what it says."""

    type: ClassVar[str] = "pass_event"
    pass_number: int
    event: str
    record: dict[str, Any]


@dataclass(slots=True)
class StageFinished(RunEvent):
    """A flow's node stage ended (spec 004 §6): its history record."""

    type: ClassVar[str] = "stage_finished"
    stage: dict[str, Any]


@dataclass(slots=True)
class CycleEnded(RunEvent):
    """A cycle was committed: ``entry`` is its JSONL record."""

    type: ClassVar[str] = "cycle_ended"
    entry: LogEntry

    def summary(self) -> str:
        return f"cycle {self.entry.step_number} ended ({self.entry.ttl_remaining} left)"


@dataclass(slots=True)
class RunFinished(RunEvent):
    """The run ended: ``result`` is the dict ``Engine.run`` returns."""

    type: ClassVar[str] = "run_finished"
    result: dict[str, Any]

    def summary(self) -> str:
        return f"run {self.result.get('status')}: {self.result.get('message')}"
