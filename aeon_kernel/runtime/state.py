"""A run as its cycles change it: mutable, private to one :class:`~aeon_kernel.runtime.run.Run`, with immutable
snapshots on demand.

Everything outside the run (hooks, step executors, state stores, ``Run.state``) sees
:class:`OrchestrationState` and :class:`Plan` snapshots, which never change under their holder. Building a new
snapshot on every change cost a new step, plan and state per transition, three of them per step; here a change
replaces one step in a list and drops the cached snapshots, which are rebuilt only when somebody asks. The
transition rules stay in one place: :func:`aeon_kernel.models.moved_step`.

A scheduler's own durable data is a :class:`SchedulerMemo`, a pydantic model it keeps here (:meth:`RunState.keep`,
:meth:`RunState.memo`) and changes in place; a snapshot stores it as JSON in ``scheduler_state``, under its ``key``.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from aeon_kernel.errors import RunStoreError, StateTransitionError
from aeon_kernel.models import (
    Check,
    OrchestrationState,
    Plan,
    PlanStep,
    RunStatus,
    StepStatus,
    SupervisorAction,
    ToolCall,
    current_after,
    moved_step,
)


class SchedulerMemo(BaseModel):
    """What a scheduler remembers across a crash, as a pydantic model (pydantic_graph's typed state).

    A scheduler subclasses it — its fields are what it must remember — and names it by ``key``, the key it is
    stored under in ``OrchestrationState.scheduler_state``. It keeps its memo in the run's state
    (:meth:`RunState.keep`), gets it back each cycle (:meth:`RunState.memo`) and changes it in place, calling
    :meth:`RunState.changed` after a change; a snapshot stores it as JSON. A run stored by an earlier version
    loads when the memo accepts that layout (a ``model_validator(mode="before")``); otherwise loading it raises
    a :class:`RunStoreError` saying so.
    """

    #: where it is stored in ``scheduler_state`` (the scheduler's name)
    key: ClassVar[str]

    @classmethod
    def stored(cls, state: OrchestrationState) -> Self | None:
        """The memo ``state`` holds, read from its JSON (to read, e.g. in ``conclude``), or None when it holds none."""
        data = state.scheduler_state.get(cls.key)
        return None if data is None else cls.loaded(data, state.run_id)

    @classmethod
    def loaded(cls, data: Any, run_id: str) -> Self:
        """The memo stored as ``data`` (JSON) in run ``run_id``; a :class:`RunStoreError` when it cannot be read."""
        try:
            return cls.model_validate(data)
        except PydanticValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'the memo'}: {e['msg']}" for e in exc.errors()[:3]
            )
            raise RunStoreError(
                f"run {run_id} cannot be resumed: its {cls.key!r} state was stored by another (older or newer) "
                f"version of its scheduler, which this one cannot read ({problems}). Finish it with the version "
                "that started it, or run the request again."
            ) from None


M = TypeVar("M", bound=SchedulerMemo)


class RunState:
    """The working copy of one run's :class:`OrchestrationState`."""

    __slots__ = (
        "_memos",
        "_plan",
        "_snapshot",
        "checks",
        "current_step_id",
        "cycle",
        "errors",
        "goal",
        "index",
        "llm_outputs",
        "request",
        "run_id",
        "scheduler_state",
        "status",
        "steps",
        "supervisor_actions",
        "tool_history",
        "ttl_remaining",
    )
    goal: str | None
    steps: list[PlanStep]
    index: dict[str, int]
    _plan: Plan | None
    _snapshot: OrchestrationState | None

    def __init__(self, state: OrchestrationState) -> None:
        self.run_id = state.run_id
        self.request = state.request
        self.current_step_id = state.current_step_id
        self.tool_history: list[ToolCall] = list(state.tool_history)
        self.llm_outputs: list[dict[str, Any]] = list(state.llm_outputs)
        self.supervisor_actions: list[SupervisorAction] = list(state.supervisor_actions)
        self.checks: list[Check] = list(state.checks)
        self.errors: list[dict[str, Any]] = list(state.errors)
        self.ttl_remaining = state.ttl_remaining
        self.cycle = state.cycle
        self.status: RunStatus = state.status
        #: the scheduler's own durable data (JSON); a scheduler that changes it calls :meth:`changed`
        self.scheduler_state: dict[str, Any] = dict(state.scheduler_state)
        #: the schedulers' typed memos, by key: kept in place of their JSON in ``scheduler_state``
        self._memos: dict[str, SchedulerMemo] = {}
        self._use_plan(state.plan)
        self._snapshot = state

    def restore(self, state: OrchestrationState) -> None:
        """Start again from ``state`` (a waiting run given a person's answer), keeping this object."""
        self.__init__(state)  # type: ignore[misc]

    # --- snapshots ---------------------------------------------------------------------------------------------

    def plan(self) -> Plan | None:
        """The plan now, as an immutable snapshot (None while it is being generated)."""
        if self._plan is None and self.goal is not None:
            self._plan = Plan.from_steps(self.goal, tuple(self.steps), self.index)
        return self._plan

    def snapshot(self) -> OrchestrationState:
        """The whole state now, as an immutable snapshot."""
        if self._snapshot is None:
            self._snapshot = OrchestrationState.trusted(
                run_id=self.run_id,
                request=self.request,
                plan=self.plan(),
                current_step_id=self.current_step_id,
                tool_history=tuple(self.tool_history),
                llm_outputs=tuple(self.llm_outputs),
                supervisor_actions=tuple(self.supervisor_actions),
                checks=tuple(self.checks),
                errors=tuple(self.errors),
                ttl_remaining=self.ttl_remaining,
                cycle=self.cycle,
                status=self.status,
                scheduler_state=self._durable(),
            )
        return self._snapshot

    def _durable(self) -> dict[str, Any]:
        """``scheduler_state`` for a snapshot: its own copy (schedulers change theirs in place), memos as JSON."""
        if not self._memos:
            return copy.deepcopy(self.scheduler_state) if self.scheduler_state else {}
        durable = {k: copy.deepcopy(v) for k, v in self.scheduler_state.items() if k not in self._memos}
        for key, memo in self._memos.items():
            durable[key] = memo.model_dump(mode="json")
        return durable

    # --- reading -----------------------------------------------------------------------------------------------

    def step(self, step_id: str) -> PlanStep:
        return self.steps[self.index[step_id]]

    def all_complete(self) -> bool:
        return all(step.status is StepStatus.COMPLETE for step in self.steps)

    def memo(self, kind: type[M]) -> M | None:
        """The memo of type ``kind`` this run keeps (:meth:`keep`), or None. A resumed run's is loaded from its stored
        JSON on first use (:class:`RunStoreError` if unreadable); the scheduler then changes it in place."""
        memo = self._memos.get(kind.key)
        if memo is None:
            data = self.scheduler_state.get(kind.key)
            if data is None:
                return None
            # the stored JSON may be shared with an immutable snapshot: the memo gets its own copy
            memo = self._memos[kind.key] = kind.loaded(copy.deepcopy(data), self.run_id)
        if not isinstance(memo, kind):
            raise TypeError(
                f"the memo kept under {kind.key!r} is a {type(memo).__name__}, not a {kind.__name__}"
            )
        return memo

    # --- changes -----------------------------------------------------------------------------------------------

    def start_plan(self, plan: Plan) -> None:
        """A newly generated plan: its first step is the next to run."""
        self._use_plan(plan)
        self.current_step_id = plan.steps[0].step_id
        self._snapshot = None

    def transition(
        self, step_id: str, status: StepStatus, *, result: Any = None, failure: str | None = None
    ) -> tuple[PlanStep, StepStatus]:
        """Move one step (the rules: :func:`moved_step`), advance ``current_step_id``; the step, its old status."""
        index = self.index.get(step_id)
        if index is None:
            raise StateTransitionError(f"no step {step_id!r} in the plan")
        previous = self.steps[index].status
        step = self.steps[index] = moved_step(self.steps, index, status, result=result, failure=failure)
        self.current_step_id = current_after(self.steps, index)
        self._plan = self._snapshot = None
        return step, previous

    def restructure(self, steps: list[PlanStep], goal: str | None = None) -> None:
        """A refined plan (spec 003 deltas, checked by the caller); the current step becomes the one holding the
        run's place, or else the first that has not finished."""
        self.steps = list(steps)
        self.index = {step.step_id: i for i, step in enumerate(self.steps)}
        self.goal = goal or self.goal
        self.current_step_id = next(
            (s.step_id for s in self.steps if s.status.holds_place),
            next((s.step_id for s in self.steps if not s.status.is_terminal), None),
        )
        self._plan = self._snapshot = None

    def changed(self) -> None:
        """Something the snapshot shows changed in place (a memo, ``scheduler_state``, ``ttl_remaining``)."""
        self._snapshot = None

    def keep(self, memo: SchedulerMemo) -> None:
        """Keep ``memo`` as this run's memo of its type (replacing any under its ``key``); snapshots store it."""
        self._memos[memo.key] = memo
        self._snapshot = None

    def replace_step(self, step: PlanStep) -> None:
        """Swap in a repaired step; its id, position and status must not change (FR-053)."""
        index = self.index.get(step.step_id)
        if index is None:
            raise StateTransitionError(f"no step {step.step_id!r} in the plan")
        if self.steps[index].status is not step.status:
            raise StateTransitionError(f"replacing step {step.step_id!r} may not change its status")
        self.steps[index] = step
        self._plan = self._snapshot = None

    def end_cycle(
        self,
        tool_calls: list[ToolCall],
        llm_outputs: list[dict[str, Any]],
        supervisor_actions: list[SupervisorAction],
        errors: list[dict[str, Any]],
        checks: list[Check] | None = None,
    ) -> None:
        """FR-035: one cycle done, one unit of TTL spent; the cycle's records appended to the histories."""
        self.cycle += 1
        self.ttl_remaining = max(0, self.ttl_remaining - 1)
        self.tool_history += tool_calls
        self.llm_outputs += llm_outputs
        self.supervisor_actions += supervisor_actions
        if checks:
            self.checks += checks
        self.errors += errors
        self._snapshot = None

    def record_error(self, error: dict[str, Any]) -> None:
        self.errors.append(error)
        self._snapshot = None

    def finish(self, status: RunStatus) -> None:
        self.status = status
        self._snapshot = None

    def _use_plan(self, plan: Plan | None) -> None:
        self.goal = plan.goal if plan is not None else None
        self.steps = list(plan.steps) if plan is not None else []
        self.index = {step.step_id: i for i, step in enumerate(self.steps)}
        self._plan = plan
