"""The Scheduler protocol: what a run does next, and what its outcome changes.

A :class:`~aeon_kernel.runtime.run.Run` owns the cycle — the TTL, the log record, the commit, the events — and
asks its scheduler four things, in this order, every cycle::

    status(run)               is the run over? (None: not yet)
    next_work(run)            claim the next unit of work (e.g. mark a step running)
    perform(work, run)        do it, and return its outcome, without changing the run's state
    apply(work, outcome, run) write the outcome into the state

``perform`` and ``apply`` are apart so that the work itself can run elsewhere (a thread, a Ray worker) while the
state changes stay with the run. When a cycle raises, the run calls ``abandon`` instead of ``apply``.

The linear plan is one scheduler (:class:`aeon_plugins.planning.linear.LinearPlanScheduler`); the multi-pass loop of
spec 003 and the DAG router of spec 004 are others. A scheduler instance belongs to one run (the engine builds one
per run from the ``schedulers`` registry); whatever it must remember across a crash lives in the run's state — its
memo, a pydantic model (:class:`~aeon_kernel.runtime.state.SchedulerMemo`) — so ``aeon resume`` can rebuild it.
``Scheduler[MemoT, OutcomeT]`` names the memo's type and the type of what ``perform`` returns (pydantic_graph's
typed state): both default, so a plain ``Scheduler`` subclass keeps no memo and passes ``Any``.

Between cycles a face (the inspector's step-through) may ask ``preview(run)`` what the next cycle will do: a
:class:`Preview`, told without doing any of it, so that no face re-implements a scheduler.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple

from typing_extensions import TypeVar

from aeon_kernel.models import ConvergenceAssessment, OrchestrationState, Phase, RunStatus
from aeon_kernel.runtime.state import SchedulerMemo

if TYPE_CHECKING:
    from aeon_kernel.runtime.context import RunContext

#: the type of a scheduler's memo (``Never`` for a scheduler that keeps none, with ``memo_type`` None)
MemoT = TypeVar("MemoT", bound=SchedulerMemo, covariant=True, default=SchedulerMemo)
#: the type of what a scheduler's ``perform`` returns and its ``apply`` takes
OutcomeT = TypeVar("OutcomeT", default=Any)
#: what sort of unit a :class:`Preview` describes, so that a face can choose how to show it
PreviewKind = Literal["plan", "step", "stage", "node", "other"]


class Work(NamedTuple):
    """One unit of work: what a cycle does. ``phase`` and ``step_id`` go into the cycle's log record.

    A cycle may work on several units at once (a flow's stages): ``units`` names them one by one, and ``step_id``
    is their names joined by spaces, as the log record has it; :meth:`of` builds both. A named tuple, since a run
    makes one per cycle: immutable and cheap.
    """

    phase: Phase
    step_id: str | None = None
    #: the units the cycle works on, one by one, when it names them with :meth:`of`
    units: tuple[str, ...] = ()

    @classmethod
    def of(cls, phase: Phase, units: Iterable[str]) -> Work:
        """Work on ``units``: ``step_id`` is their names joined by spaces (None for none)."""
        named = tuple(units)
        return cls(phase, " ".join(named) or None, named)


@dataclass(frozen=True, slots=True)
class Verdict:
    """How a run ended: its status and, when a convergence engine was asked, its assessment."""

    status: RunStatus
    convergence: ConvergenceAssessment | None = None

    def __post_init__(self) -> None:
        if self.status not in ("completed", "failed", "ttl_expired"):
            raise ValueError(f"a run ends completed, failed or ttl_expired, not {self.status!r}")


@dataclass(frozen=True, slots=True)
class Conclusion:
    """What a run's result says besides its status: the answer, and a sentence on why it ended as it did."""

    answer: Any
    message: str
    #: more of the result, by key (a multi-pass run adds its ``execution_history``); JSON
    details: dict[str, Any] = field(default_factory=dict)
    #: the assessment to report when the verdict has none (a run whose TTL ran out: its latest completed pass's)
    convergence: ConvergenceAssessment | None = None


@dataclass(frozen=True, slots=True)
class Preview:
    """What the next cycle will do, told before it starts and without doing any of it (:meth:`Scheduler.preview`).

    ``phase`` and ``units`` are what the cycle's :class:`Work` will say (``phase`` None: the scheduler cannot tell
    before the cycle); the rest is for a person: ``kind`` says what sort of unit it is — ``plan`` (the plan is
    written), ``step`` (a plan step runs), ``stage`` (another stage of the scheduler's loop), ``node`` (a flow's
    stages) or ``other`` — and ``details`` holds what a face shows of it, as JSON-like values (the prompt the model
    will get, the step, the stages with their input and context).
    """

    phase: Phase | None
    units: tuple[str, ...] = ()
    kind: PreviewKind = "other"
    #: a few words: "plan generation", "step 2", "pass 1: evaluate", "t1.1/left, t1.2/right"
    title: str = ""
    #: a sentence or two on what the cycle does
    what: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def step_id(self) -> str | None:
        """The units as the cycle's log record will name them (several: joined by spaces), or None."""
        return " ".join(self.units) or None


class Scheduler(ABC, Generic[MemoT, OutcomeT]):
    """Decides what a run does next and applies what happened (see the module docstring for the cycle)."""

    #: the pydantic model of what the scheduler remembers across a crash, kept in the run's state (:meth:`memo`);
    #: None when it keeps nothing beyond the plan (the linear scheduler)
    memo_type: type[MemoT] | None = None
    #: whether a run on this scheduler can be asked for a typed output (``RunContext.output_schema``): its
    #: conclusion then carries ``details["output"]``
    writes_typed_output: bool = False
    #: whether the run's request is what its tool calls answer, so that each tool reviews them against it when the
    #: run ends (:meth:`~aeon_kernel.tools.Tool.review`); a flow's nodes call tools for their own inputs
    reviews_tool_calls: bool = True

    def memo(self, run: RunContext) -> MemoT | None:
        """This scheduler's memo in ``run``: None until it keeps one (``run.state.keep(memo)``, usually in
        :meth:`start`), or when ``memo_type`` is None. A resumed run's is read back from the stored run."""
        return None if self.memo_type is None else run.state.memo(self.memo_type)

    def start(self, run: RunContext, *, resumed: bool) -> None:
        """Called once before the first cycle; ``resumed`` when the run continues from a state store."""

    @abstractmethod
    def status(self, run: RunContext) -> Verdict | None:
        """The run's end (completed or failed), or None while there is work left.

        The run itself ends a run whose TTL is spent (``ttl_expired``) or whose model is unavailable.
        """

    @abstractmethod
    def next_work(self, run: RunContext) -> Work:
        """Claim the next unit of work; called only when :meth:`status` said None."""

    @abstractmethod
    def perform(self, work: Work, run: RunContext) -> OutcomeT:
        """Do ``work`` and return its outcome. Reads the run's state but does not change it."""

    @abstractmethod
    def apply(self, work: Work, outcome: OutcomeT, run: RunContext) -> None:
        """Write ``outcome`` into the run's state (statuses, results, the cycle's tool calls and events)."""

    def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:
        """A cycle raised ``error`` (``work`` is None when :meth:`next_work` did): leave the state consistent.

        The run has already put the error in the cycle's record; by default there is nothing else to do.
        """

    def conclude(self, state: OrchestrationState, verdict: Verdict) -> Conclusion:
        """The answer and message of the finished run (``state`` is final)."""
        return Conclusion(answer=None, message=verdict.status)

    def end(self, run: RunContext) -> None:
        """The run ended and every listener heard its result: release what nothing needs any more (its results in
        memory, :meth:`Memory.release`; a resumed run restores them in :meth:`start`)."""

    def preview(self, run: RunContext) -> Preview | None:
        """What the next cycle will do, or None when the run ends at the next :meth:`status` instead.

        Asked between cycles (before the first one too, when :meth:`start` has not run yet) by a face that steps
        through a run; it must change nothing — no state, no memo, no model call, no event. The run itself answers
        None for a run that has ended or has no TTL left. By default: what can be said of any scheduler — it decides
        its work when the cycle starts — with its durable state.
        """
        return Preview(
            None,
            title=f"the {type(self).__name__}'s next unit of work",
            what="This scheduler decides its work when the cycle starts; its durable state is below.",
            details={"state": run.state.snapshot().scheduler_state},
        )
