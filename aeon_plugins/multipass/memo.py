"""What the multi-pass scheduler remembers across a crash (:class:`MultiPassMemo`), and what its next cycle does,
told from it before the cycle starts (:func:`upcoming`, the scheduler's ``preview``).

The memo is a pydantic model kept in the run's state and stored as JSON under ``scheduler_state["multipass"]``,
with the keys the scheduler has always used: the stage, the pass, the refinement ledger, the passes so far and
the one in progress, the profile and the TTL it allocated, whether the task is deep, the latest report and
assessment, the request's parts. A run stored by an earlier version — its memo a dict of those keys, with ``{}``
for no pass in progress and without the keys it did not write yet — loads as it is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, ClassVar, Final, Literal, NotRequired

from pydantic import BaseModel, Field, PlainSerializer, PlainValidator, model_validator
from typing_extensions import TypedDict

from aeon_kernel import (
    ConvergenceAssessment,
    Plan,
    PlanStep,
    Preview,
    RefinementAction,
    RunContext,
    SchedulerMemo,
    SemanticValidationReport,
    StepStatus,
    TaskProfile,
)
from aeon_kernel.kit import ExecutionPass, PassPhase, Phase
from aeon_plugins.multipass.deltas import RefinementLedger
from aeon_plugins.planning import LinearPlanScheduler

#: where the scheduler is in its loop (the module docstring of :mod:`aeon_plugins.multipass.passes`)
Stage = Literal[
    "profile",
    "plan",
    "validate",
    "refine_plan",
    "execute",
    "evaluate",
    "refine",
    "subplan",
    "update_profile",
    "done",
]
#: stage -> (the cycle's phase in the log record, the spec 003 phase it belongs to)
STAGES: Final[dict[Stage, tuple[Phase, PassPhase]]] = {
    "profile": ("profile", "A"),
    "plan": ("plan", "B"),
    "validate": ("validate", "B"),
    "refine_plan": ("refine", "B"),
    "execute": ("step", "C"),
    "evaluate": ("evaluate", "C"),
    "refine": ("refine", "C"),
    "subplan": ("refine", "C"),
    "update_profile": ("update_profile", "D"),
}
#: a part's subplan: not asked for yet, in the plan in the part's place, or not made (the part runs as it is)
Subplan = Literal["pending", "planned", "unplanned"]


class Part(TypedDict):
    """One part of a decomposed request (:mod:`aeon_plugins.multipass.decompose`), as its events show it too."""

    step_id: str
    text: str
    subplan: Subplan
    #: the previous part's result, as the subplan was asked with it
    context: NotRequired[str | None]
    #: why the part has no subplan
    error: NotRequired[str]


def part_record(step: PlanStep) -> Part:
    """A part as the scheduler remembers it, its subplan not asked for yet."""
    return {"step_id": step.step_id, "text": step.description, "subplan": "pending"}


def _ledger(value: Any) -> RefinementLedger:
    if isinstance(value, RefinementLedger):
        return value
    if not isinstance(value, dict):
        raise ValueError("a refinement ledger is a JSON object")
    try:
        return RefinementLedger.from_json(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a refinement ledger: {exc}") from None


#: the ledger in the memo is the deltas' own object; stored as its JSON (sets sorted)
Ledger = Annotated[RefinementLedger, PlainValidator(_ledger), PlainSerializer(RefinementLedger.to_json)]


class OpenPass(BaseModel):
    """The pass in progress: what its :class:`ExecutionPass` record will say when it closes."""

    pass_number: int
    phase: PassPhase
    plan_snapshot: Plan | None = None
    started: str
    #: ``time.time()`` at its start, for its duration
    started_at: float
    report: SemanticValidationReport | None = None
    assessment: ConvergenceAssessment | None = None
    #: assessed for convergence (a phase boundary: the pass is complete)
    evaluated: bool = False
    #: the refinements applied in it
    refinements: list[RefinementAction] = Field(default_factory=list)


class MultiPassMemo(SchedulerMemo):
    """The multi-pass scheduler's memo; it changes it in place (then ``run.state.changed()``)."""

    key: ClassVar[str] = "multipass"

    stage: Stage
    pass_number: int = 0
    ledger: Ledger
    #: the passes closed so far
    passes: list[ExecutionPass] = Field(default_factory=list)
    current: OpenPass | None = None
    #: the latest assessment said so
    converged: bool = False
    #: the most cycles the run may have in all: ``[reasoning] ttl_cap``, at most its TTL when it started
    ttl_cap: int
    #: ``time.time()`` when the run started, for its total time
    started_at: float
    profile: TaskProfile | None = None
    #: the TTL the latest profile allocated
    allocated_ttl: int | None = None
    #: how many steps the plan had as written
    plan_steps: int | None = None
    #: whether the task gets the semantic validation and the judge (decided when its plan is written)
    deep: bool | None = None
    #: the latest semantic validation report, and the latest convergence assessment
    report: SemanticValidationReport | None = None
    assessment: ConvergenceAssessment | None = None
    #: the request was split into its parts (once per run)
    decomposed: bool = False
    parts: list[Part] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _earlier_layout(cls, data: Any) -> Any:
        """Earlier versions kept ``{}`` where no pass is in progress."""
        if isinstance(data, dict) and data.get("current") == {}:
            return {**data, "current": None}
        return data

    def part(self, step_id: str, subplan: Subplan | None = None) -> Part | None:
        """The part step ``step_id`` is (with its subplan in state ``subplan``, when given), or None."""
        return next(
            (p for p in self.parts if p["step_id"] == step_id and subplan in (None, p["subplan"])),
            None,
        )


def upcoming(run: RunContext, linear: LinearPlanScheduler) -> Preview | None:
    """The next cycle: the choice ``next_work`` makes, without what it changes. Before the first cycle the memo
    is not kept yet: a new run opens pass 0 at its profile, or pass 1 at its first step when it has a plan."""
    memo = run.state.memo(MultiPassMemo)
    if memo is None:
        planned = run.state.goal is not None
        stage: Stage = "execute" if planned else "profile"
        number = 1 if planned else 0
    else:
        stage, number = memo.stage, memo.pass_number
    if stage == "done":
        return None  # status ends the run
    number = number or 1  # pass 0's stages are titled as the page always did
    if stage == "execute":
        current = run.state.current_step_id
        if (
            current is not None
            and memo is not None
            and memo.part(current, "pending") is not None
            and memo.ledger.refusal(current) is None
        ):
            stage = "subplan"  # a part of a decomposed request: its subplan first
        elif current is not None and run.state.step(current).status is not StepStatus.INVALID:
            step = linear.preview(run)
            return None if step is None else replace(step, title=f"pass {number}: step {current}")
        else:
            stage = "evaluate"  # nothing (more) to run in this pass
    return Preview(
        STAGES[stage][0],
        (),
        "stage",
        f"pass {number}: {stage.replace('_', ' ')}",
        "A multi-pass stage (spec 003): profile the task, plan, validate the plan, refine it, execute its steps, "
        "evaluate convergence, refine, update the profile.",
        {"request": run.state.request},
    )
