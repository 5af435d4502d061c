"""Artifacts (spec 004 §10.1, issue 15): every validated output, tool result, telemetry payload and model call
of a run, kept in a store indexed by run, task, node or step, schema and time.

The state store keeps what a run needs to go on; the artifact store keeps what it produced, so that a user (``aeon
artifacts RUN_ID``), an evaluation rig, the inspector or an auditor can find one output without reading logs. The
:class:`ArtifactCollector` turns each finished cycle into artifacts — the plan the cycle accepted, each tool's
result, each step's and each flow stage's output, the cycle's own record —, each model call
(``aeon_model_called``) into one holding its request, prompt included, and its output, each multi-pass event
(``aeon_pass_event``) into one, and the run's end into its answer. What is stored is scrubbed of every
registered secret first.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from aeon_kernel.markers import hookimpl
from aeon_kernel.models import FrozenModel, LogEntry, OrchestrationState, StepStatus, utc_now
from aeon_kernel.secrets import scrub_secrets_data

#: What an artifact is: the plan a cycle accepted, a tool call's result, a step's or a flow stage's output, the
#: memory a flow stage read, the run's answer, a cycle's telemetry record, a model call (its request, prompt
#: included, and its output), a multi-pass run's event (spec 003: pass, profile, TTL, report, assessment,
#: refinement), an evaluation case's outcome (``aeon eval``), or a call's request for approval and a person's
#: answer (decision 0021).
ArtifactKind = Literal[
    "plan",
    "tool_result",
    "step_output",
    "stage_output",
    "memory_snapshot",
    "answer",
    "telemetry",
    "model_call",
    "pass_event",
    "evaluation",
    "approval",
]
#: the model a multi-pass event's record is (``aeon_pass_event``), as its artifact's schema
PASS_SCHEMAS: dict[str, str] = {
    "profile": "TaskProfile",
    "profile_update": "TaskProfile",
    "report": "SemanticValidationReport",
    "assessment": "ConvergenceAssessment",
    "pass_end": "ExecutionPass",
}


class Artifact(FrozenModel):
    """One stored output, with what it is indexed by."""

    run_id: str
    kind: ArtifactKind
    #: the plan step or the flow node that produced it (None for run-wide artifacts)
    node: str | None = None
    #: a flow's task (``t1``, ``t1.2``); None outside flows
    task: str | None = None
    #: the schema the value was validated against: ``Plan``, ``tool:<name>`` (the tool's output schema), a flow
    #: schema's name, ``LogEntry``; None when nothing held it to one
    schema_name: str | None = None
    #: the cycle that produced it (0: the run's end)
    cycle: int = Field(default=0, ge=0)
    timestamp: str = Field(default_factory=utc_now)
    value: Any = None


class ArtifactStore(ABC):
    """Where artifacts are kept. ``find`` answers in the order they were put."""

    @abstractmethod
    def put(self, artifacts: Sequence[Artifact]) -> None:
        """Keep ``artifacts`` (one cycle's, at once)."""

    @abstractmethod
    def find(
        self,
        run_id: str,
        *,
        node: str | None = None,
        schema_name: str | None = None,
        kind: str | None = None,
    ) -> list[Artifact]:
        """The artifacts of ``run_id``, narrowed to a node or step, a schema or a kind when given."""

    @abstractmethod
    def close(self) -> None:
        """Release what the store holds (a connection)."""


class ArtifactCollector:
    """Hook implementations that put each finished cycle's artifacts, and the run's answer, into ``store``."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store
        #: run id -> its last finished cycle (a pass event, which does not say, belongs to the next)
        self._cycles: dict[str, int] = {}

    @hookimpl
    def aeon_run_resumed(self, run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None:
        """Cycles committed while nobody collected (a crash before the cycle's event, a person's answer recorded
        by another process) get their record and approvals now."""
        self._cycles[run_id] = state.cycle
        kept = {artifact.cycle for artifact in self.store.find(run_id, kind="telemetry")}
        missed = [entry for entry in entries if entry.step_number not in kept]
        self.store.put([_scrubbed(a) for entry in missed for a in (*_approvals(entry), _telemetry(entry))])

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        self._cycles[entry.run_id] = entry.step_number
        self.store.put([_scrubbed(a) for a in cycle_artifacts(entry, state)])

    @hookimpl
    def aeon_pass_event(self, run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None:
        made = Artifact(
            run_id=run_id,
            kind="pass_event",
            schema_name=PASS_SCHEMAS.get(event),
            cycle=self._cycles.get(run_id, 0) + 1,
            value={"pass_number": pass_number, "event": event, "record": record},
        )
        self.store.put([_scrubbed(made)])

    @hookimpl
    def aeon_model_called(self, run_id: str, cycle: int, call: dict[str, Any]) -> None:
        made = Artifact(run_id=run_id, kind="model_call", schema_name="ModelCall", cycle=cycle, value=call)
        self.store.put([_scrubbed(made)])

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
        self._cycles.pop(run_id, None)
        answer = Artifact(run_id=run_id, kind="answer", value=result.get("answer"))
        self.store.put([_scrubbed(answer)])


def cycle_artifacts(entry: LogEntry, state: OrchestrationState) -> list[Artifact]:
    """What one cycle produced: its accepted plan, tool results, the output of the step it finished, the outputs
    of its flow stages, and its own record."""
    common: dict[str, Any] = {
        "run_id": entry.run_id,
        "cycle": entry.step_number,
        "timestamp": entry.timestamp,
    }
    found: list[Artifact] = []
    if entry.phase == "plan" and state.plan is not None and not entry.errors:
        found.append(
            Artifact(kind="plan", schema_name="Plan", value=state.plan.model_dump(mode="json"), **common)
        )
    for call in entry.tool_calls:
        if call.result is not None:
            found.append(
                Artifact(
                    kind="tool_result",
                    node=call.step_id,
                    schema_name=f"tool:{call.tool_name}",
                    value=call.result,
                    **common,
                )
            )
    if entry.step_id is not None and entry.step_status is StepStatus.COMPLETE and state.plan is not None:
        step = next((s for s in state.plan.steps if s.step_id == entry.step_id), None)
        if step is not None:
            found.append(Artifact(kind="step_output", node=step.step_id, value=step.result, **common))
    for stage in entry.stages:
        if stage.get("context"):  # the memory the stage read, as it read it (spec 004 §10.10)
            node, task = stage.get("node"), stage.get("task")
            found.append(
                Artifact(kind="memory_snapshot", node=node, task=task, value=stage["context"], **common)
            )
        if stage.get("status") == "success":
            found.append(
                Artifact(
                    kind="stage_output",
                    node=stage.get("node"),
                    task=stage.get("task"),
                    schema_name=stage.get("schema"),
                    value=stage.get("output"),
                    **common,
                )
            )
    return [*found, *_approvals(entry), _telemetry(entry)]


def _approvals(entry: LogEntry) -> list[Artifact]:
    """A call's request for approval and the answer, as the cycle recorded them (decision 0021)."""
    return [
        Artifact(
            run_id=entry.run_id,
            kind="approval",
            node=record.get("step_id"),
            schema_name=record["type"],
            cycle=entry.step_number,
            timestamp=entry.timestamp,
            value=record,
        )
        for record in entry.errors
        if record.get("type") in ("ApprovalRequested", "ApprovalDecided")
    ]


def _telemetry(entry: LogEntry) -> Artifact:
    return Artifact(
        run_id=entry.run_id,
        kind="telemetry",
        node=entry.step_id,
        schema_name="LogEntry",
        cycle=entry.step_number,
        timestamp=entry.timestamp,
        value=entry.model_dump(mode="json", exclude={"plan_state"}),
    )


def _scrubbed(artifact: Artifact) -> Artifact:
    return artifact.model_copy(update={"value": scrub_secrets_data(artifact.value)})
