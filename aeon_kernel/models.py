"""The data model of spec 001 as pydantic models.

Models are frozen, so a snapshot handed to a telemetry sink, a step executor or an embedder can never change under
it. A run changes one private working copy (:class:`aeon_kernel.runtime.state.RunState`) and hands out snapshots
of it; the step transition rules are enforced in one function, :func:`moved_step`, which that working copy calls.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from aeon_kernel.errors import StateTransitionError

_stamp: tuple[int, str] = (0, "")


def utc_now() -> str:
    """An ISO 8601 timestamp in UTC with milliseconds, the format every record in spec 001 uses.

    The loop stamps several records in one millisecond, so the current millisecond's text is kept (a third of
    ``datetime.isoformat``'s cost when it must be formatted, nothing when it need not). One tuple, swapped atomically.
    """
    global _stamp
    millisecond = int(time.time() * 1000)
    stamp = _stamp
    if stamp[0] != millisecond:
        second, rest = divmod(millisecond, 1000)
        text = f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(second))}.{rest:03d}+00:00"
        stamp = _stamp = (millisecond, text)
    return stamp[1]


def _check_iso(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"timestamp {value!r} is not ISO 8601") from None
    return value


class StepStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"
    #: spec 003: a running step found BLOCKED, or made inconsistent by a refinement. It holds the run's place
    #: (nothing after it starts) until a refinement replaces it, or fails it when none does; complete and failed
    #: steps are never refined.
    INVALID = "invalid"

    @property
    def is_terminal(self) -> bool:
        return self in (StepStatus.COMPLETE, StepStatus.FAILED)

    @property
    def holds_place(self) -> bool:
        """Running or invalid: the one step a plan may be stopped at."""
        return self in (StepStatus.RUNNING, StepStatus.INVALID)


_ALLOWED_TRANSITIONS: dict[StepStatus, frozenset[StepStatus]] = {
    StepStatus.PENDING: frozenset({StepStatus.RUNNING}),
    StepStatus.RUNNING: frozenset({StepStatus.COMPLETE, StepStatus.FAILED, StepStatus.INVALID}),
    StepStatus.COMPLETE: frozenset(),
    StepStatus.FAILED: frozenset(),
    # left by a refinement that replaces the step (aeon_plugins.multipass.deltas), or failed when none does
    StepStatus.INVALID: frozenset({StepStatus.FAILED}),
}

ClarityState = Literal["CLEAR", "PARTIALLY_CLEAR", "BLOCKED"]


def _is_none(value: Any) -> bool:
    return value is None


def _is_empty(value: Any) -> bool:
    return not value


_FROZEN = ConfigDict(frozen=True, extra="ignore")
_set = object.__setattr__


class FrozenModel(BaseModel):
    """A frozen model whose copies and kernel-built instances are cheap: the loop makes several per cycle.

    Sharing unchanged field values between copies is safe because every model here is frozen.
    """

    model_config = _FROZEN

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's shallow ``model_copy`` (no validation of ``update``), without its generic machinery."""
        if deep:
            return super().model_copy(update=update, deep=True)
        values = self.__dict__.copy()
        fields_set = set(self.__pydantic_fields_set__)
        if update:
            values.update(update)
            fields_set.update(update)
        private = self.__pydantic_private__
        return self._assemble(values, fields_set, None if private is None else private.copy())

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """An instance from values the kernel built and checked itself: every field given, none re-validated."""
        if len(values) != len(cls.__pydantic_fields__):
            missing = sorted(set(cls.__pydantic_fields__) - set(values))
            raise TypeError(f"{cls.__name__}.trusted needs every field; missing {missing}")
        private = None
        if cls.__private_attributes__:
            private = {name: attr.get_default() for name, attr in cls.__private_attributes__.items()}
        return cls._assemble(values, set(values), private)

    @classmethod
    def _assemble(cls, values: dict[str, Any], fields_set: set[str], private: dict[str, Any] | None) -> Self:
        new = cls.__new__(cls)
        _set(new, "__dict__", values)
        _set(new, "__pydantic_fields_set__", fields_set)
        _set(new, "__pydantic_extra__", None)
        _set(new, "__pydantic_private__", private)
        return new


class PlanStep(FrozenModel):
    """One step of a plan. ``tool`` wins over ``agent``; with neither, the step takes the missing-tool path.

    ``arguments`` (an Aeon extension, pure data) lets a plan carry a tool's arguments when they are known at plan
    time, so no extra model call is needed. ``result`` and ``failure`` record how the step ended.
    """

    step_id: str = Field(min_length=1)
    description: str = Field(min_length=1)
    status: StepStatus = StepStatus.PENDING
    tool: str | None = None
    agent: Literal["llm"] | None = None
    arguments: dict[str, Any] | None = None
    errors: tuple[str, ...] = ()
    result: Any = None
    failure: str | None = None
    # Spec 003's step additions, used by multi-pass plans. Left out of a dump while unset, so a single-pass
    # plan's JSON (log lines, results, prompts) is what it always was.
    step_index: int | None = Field(default=None, ge=1, exclude_if=_is_none)
    total_steps: int | None = Field(default=None, ge=1, exclude_if=_is_none)
    incoming_context: str = Field(default="", exclude_if=_is_empty)
    handoff_to_next: str = Field(default="", exclude_if=_is_empty)
    dependencies: tuple[str, ...] = Field(default=(), exclude_if=_is_empty)
    provides: tuple[str, ...] = Field(default=(), exclude_if=_is_empty)
    clarity_state: ClarityState | None = Field(default=None, exclude_if=_is_none)

    @field_validator("step_id", "description")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("tool")
    @classmethod
    def _tool_not_blank(cls, value: str | None) -> str | None:
        return value if value and value.strip() else None

    @model_validator(mode="after")
    def _index_within_total(self) -> PlanStep:
        if (
            self.step_index is not None
            and self.total_steps is not None
            and self.total_steps < self.step_index
        ):
            raise ValueError(f"total_steps ({self.total_steps}) is less than step_index ({self.step_index})")
        return self


class Plan(FrozenModel):
    """A declarative plan (FR-006/007): a goal and an ordered list of steps, executed strictly in order."""

    goal: str = Field(min_length=1)
    steps: tuple[PlanStep, ...] = Field(min_length=1)
    # step_id -> position, built on first lookup. A copy with other steps starts without it (see model_copy).
    _index: dict[str, int] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_structure(self) -> Plan:
        counts = Counter(s.step_id for s in self.steps)
        duplicates = sorted(i for i, n in counts.items() if n > 1)
        if duplicates:
            raise ValueError(f"step_id values must be unique; repeated: {duplicates}")
        # Strict order (FR-052): finished steps, then at most one running (or invalid) step, then pending steps.
        ranks = [0 if s.status.is_terminal else 1 if s.status.holds_place else 2 for s in self.steps]
        if ranks != sorted(ranks) or ranks.count(1) > 1:
            raise ValueError(
                "step statuses are out of order: steps must be finished, then at most one running or invalid, "
                "then pending"
            )
        return self

    def __eq__(self, other: object) -> bool:
        """Plans are values: equal when their goal and steps are (the index cache does not count)."""
        if not isinstance(other, Plan):
            return NotImplemented
        return self.goal == other.goal and self.steps == other.steps

    __hash__ = None  # type: ignore[assignment]  # steps hold dicts: a plan was never hashable

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; one given other ``steps`` drops the position index, which described the old steps."""
        copy = super().model_copy(update=update, deep=deep)
        if update and "steps" in update and copy.__pydantic_private__ is not None:
            copy.__pydantic_private__["_index"] = None
        return copy

    def index_of(self, step_id: str) -> int:
        """The position of ``step_id`` (KeyError if absent), from a cache built once per plan lineage."""
        private = self.__pydantic_private__  # direct access: pydantic's __getattr__ is slow on a hot path
        index: dict[str, int] | None = private.get("_index") if private is not None else None
        if index is None:
            index = {step.step_id: i for i, step in enumerate(self.steps)}
            if private is not None:
                private["_index"] = index
        return index[step_id]

    def step(self, step_id: str) -> PlanStep:
        return self.steps[self.index_of(step_id)]

    def next_pending(self) -> PlanStep | None:
        """The step that may start next, or None when none may (one is running, or all are finished)."""
        for step in self.steps:
            if step.status.holds_place:
                return None
            if step.status is StepStatus.PENDING:
                return step
        return None

    def running_step(self) -> PlanStep | None:
        """The step in progress, if any (after a crash, the one to execute again on resume)."""
        return next((s for s in self.steps if s.status is StepStatus.RUNNING), None)

    @property
    def is_finished(self) -> bool:
        """FR-004: every step is complete or failed."""
        return all(s.status.is_terminal for s in self.steps)

    @classmethod
    def from_steps(cls, goal: str, steps: tuple[PlanStep, ...], index: dict[str, int] | None = None) -> Plan:
        """A plan from steps that already form a valid plan (the loop's snapshots), sharing its position index."""
        return cls._assemble({"goal": goal, "steps": steps}, {"goal", "steps"}, {"_index": index})


def moved_step(
    steps: tuple[PlanStep, ...] | list[PlanStep],
    index: int,
    status: StepStatus,
    *,
    result: Any = None,
    failure: str | None = None,
) -> PlanStep:
    """``steps[index]`` moved to ``status``: the one place spec 001's transitions and FR-052's order are enforced.

    ``errors`` are cleared when a step completes, fails or is found invalid; ``result`` and ``failure`` record how
    it ended (an invalid step's, why it is blocked). Raises :class:`StateTransitionError` on a forbidden move.
    """
    step = steps[index]
    if status not in _ALLOWED_TRANSITIONS[step.status]:
        raise StateTransitionError(
            f"step {step.step_id!r} cannot go from {step.status.value} to {status.value}",
            [
                f"allowed from {step.status.value}: {sorted(s.value for s in _ALLOWED_TRANSITIONS[step.status])}"
            ],
        )
    if status is StepStatus.RUNNING and index and not steps[index - 1].status.is_terminal:
        raise StateTransitionError(
            f"step {step.step_id!r} cannot start before every earlier step has finished"
        )
    if status.is_terminal or status is StepStatus.INVALID:
        return step.model_copy(update={"status": status, "errors": (), "result": result, "failure": failure})
    return step.model_copy(update={"status": status})


def current_after(steps: tuple[PlanStep, ...] | list[PlanStep], index: int) -> str | None:
    """``current_step_id`` once ``steps[index]`` has moved: itself while it holds its place, else the next step."""
    if steps[index].status.holds_place:
        return steps[index].step_id
    following = index + 1
    return steps[following].step_id if following < len(steps) else None


class ToolCall(FrozenModel):
    """A record of one tool invocation; ``result`` and ``error`` are mutually exclusive."""

    tool_name: str = Field(min_length=1)
    arguments: dict[str, Any]
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    timestamp: str = Field(default_factory=utc_now)
    step_id: str = Field(min_length=1)
    duration_ms: float | None = None

    _iso = field_validator("timestamp")(_check_iso)

    @model_validator(mode="after")
    def _result_xor_error(self) -> ToolCall:
        if self.result is not None and self.error is not None:
            raise ValueError("a tool call has a result or an error, not both")
        return self


SupervisorActionType = Literal["json_repair", "tool_call_repair", "plan_repair", "missing_tool_repair"]


class SupervisorAction(FrozenModel):
    """One supervisor repair attempt (FR-050): what came in, what came out or why it failed."""

    action_type: SupervisorActionType
    original_output: dict[str, Any]
    repaired_output: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    attempt_number: int = Field(ge=1, le=2)
    method: Literal["deterministic", "llm"] = "llm"
    timestamp: str = Field(default_factory=utc_now)

    _iso = field_validator("timestamp")(_check_iso)

    @model_validator(mode="after")
    def _repaired_xor_error(self) -> SupervisorAction:
        if (self.repaired_output is None) == (self.error is None):
            raise ValueError("a supervisor action has exactly one of repaired_output and error")
        return self


#: what one check found: ``passed``; ``resolved`` (it found a problem that was then fixed: a plan asked for again,
#: an answer replaced by the tools' result); ``failed`` (the problem is still there); ``inconclusive`` (it could
#: not decide, as when samples disagree); ``skipped`` (it could not run here, the detail says why)
CheckVerdict = Literal["passed", "resolved", "failed", "inconclusive", "skipped"]
#: what a check is about
CheckSubject = Literal["plan", "tool_call", "answer", "output", "run"]


class Check(FrozenModel):
    """One check of a run: what it was about, who ran it, and its verdict (with the finding when not passed)."""

    #: what ran: ``plan_fits_request``, ``review`` (a tool's review of a call), ``answer_grounded``,
    #: ``convergence``, ``output_schema``, ``agreement``, or a plugin's own name
    name: str = Field(min_length=1)
    subject: CheckSubject
    verdict: CheckVerdict
    #: the finding, or why the check could not run; None when it passed without remark
    detail: str | None = None
    step_id: str | None = None
    #: the tool whose call was checked (``review``), or who ran the check
    by: str | None = None


class MemoryEntry(FrozenModel):
    """A key/value pair in a memory backend; values must be JSON-serialisable."""

    key: str = Field(min_length=1)
    value: Any
    metadata: dict[str, Any] | None = None


#: ``waiting``: stopped until a person answers a call that needs approval (decision 0021); not an end
RunStatus = Literal["running", "waiting", "completed", "failed", "ttl_expired"]
#: What a cycle did: write the plan or execute a step; multi-pass runs (spec 003) also infer the task's profile,
#: validate the plan or the results, assess convergence, refine the plan, and update the profile.
#: A flow run (spec 004) runs node stages.
Phase = Literal["plan", "step", "profile", "validate", "evaluate", "refine", "update_profile", "node"]


class OrchestrationState(FrozenModel):
    """Everything the kernel knows about a run (FR-011), as an immutable snapshot; the histories only grow.

    ``plan`` is None only during the first cycle, while the plan is being generated.
    """

    run_id: str
    request: str
    plan: Plan | None = None
    current_step_id: str | None = None
    tool_history: tuple[ToolCall, ...] = ()
    llm_outputs: tuple[dict[str, Any], ...] = ()
    supervisor_actions: tuple[SupervisorAction, ...] = ()
    errors: tuple[dict[str, Any], ...] = ()
    ttl_remaining: int = Field(ge=0)
    cycle: int = Field(default=0, ge=0)
    status: RunStatus = "running"
    #: what was checked so far (plan, tool calls, answers): the run's verification record is made of these
    checks: tuple[Check, ...] = Field(default=(), exclude_if=_is_empty)
    #: what the run's scheduler must remember across a crash (JSON; the linear scheduler needs none, the
    #: multi-pass one keeps its pass, profile and refinement ledger here); left out of a dump while empty
    scheduler_state: dict[str, Any] = Field(default_factory=dict, exclude_if=_is_empty)


class LogEntry(FrozenModel):
    """One JSONL line per orchestration cycle (FR-037/038), written even when the cycle fails (FR-039)."""

    step_number: int = Field(ge=1)
    #: The plan at cycle start. Plans are immutable, so the snapshot is the object itself: it is serialised
    #: only when a sink writes the record, not on every cycle.
    plan_state: Plan | None
    llm_output: dict[str, Any]
    supervisor_actions: tuple[SupervisorAction, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    ttl_remaining: int = Field(ge=0)
    errors: tuple[dict[str, Any], ...] = ()
    timestamp: str = Field(default_factory=utc_now)
    run_id: str
    phase: Phase
    step_id: str | None = None
    step_status: StepStatus | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    duration_ms: float = 0.0
    #: a flow run's history records, one per node stage of this cycle (spec 004 §6); left out while empty
    stages: tuple[dict[str, Any], ...] = Field(default=(), exclude_if=_is_empty)
    #: the checks recorded in this cycle (aeon_kernel.verification); left out while empty
    checks: tuple[Check, ...] = Field(default=(), exclude_if=_is_empty)

    _iso = field_validator("timestamp")(_check_iso)


class StepExecutionResult(FrozenModel):
    """What executing one step produced (spec 002's StepExecutor)."""

    success: bool
    result: Any = None
    error: str | None = None
    execution_mode: Literal["tool", "llm", "fallback"]
    tool_calls: tuple[ToolCall, ...] = ()
    repaired_step: PlanStep | None = None


class ConvergenceAssessment(FrozenModel):
    """A convergence engine's verdict (spec 003): whether the run has reached a complete answer.

    Not converged always says why (``reason_codes``). ``consistency_status`` (how plan, steps, answer and memory
    agree) and ``detected_issues`` are left out of a dump while empty.
    """

    converged: bool
    reason_codes: tuple[str, ...] = ()
    completeness_score: float = Field(default=0.0, ge=0.0, le=1.0)
    #: None when nobody measured it (no judge asked, or the judge was unavailable): never a made-up score
    coherence_score: float | None = Field(default=None, ge=0.0, le=1.0)
    consistency_status: dict[str, Any] = Field(default_factory=dict, exclude_if=_is_empty)
    detected_issues: tuple[str, ...] = Field(default=(), exclude_if=_is_empty)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _says_why_not(self) -> ConvergenceAssessment:
        if not self.converged and not self.reason_codes:
            raise ValueError("an assessment that has not converged needs at least one reason code")
        return self
