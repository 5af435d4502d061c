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
per run from the ``schedulers`` registry); whatever it must remember across a crash lives in the run's state, so
``aeon resume`` can rebuild it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from aeon_kernel.models import ConvergenceAssessment, OrchestrationState, Phase, RunStatus

if TYPE_CHECKING:
    from aeon_kernel.runtime.context import RunContext


class Work(NamedTuple):
    """One unit of work: what a cycle does. ``phase`` and ``step_id`` go into the cycle's log record.

    A named tuple, since a run makes one per cycle: immutable and cheap.
    """

    phase: Phase
    step_id: str | None = None


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


class Scheduler(ABC):
    """Decides what a run does next and applies what happened (see the module docstring for the cycle)."""

    def start(self, run: RunContext, *, resumed: bool) -> None:  # noqa: B027 - nothing to prepare by default
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
    def perform(self, work: Work, run: RunContext) -> Any:
        """Do ``work`` and return its outcome. Reads the run's state but does not change it."""

    @abstractmethod
    def apply(self, work: Work, outcome: Any, run: RunContext) -> None:
        """Write ``outcome`` into the run's state (statuses, results, the cycle's tool calls and events)."""

    def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:  # noqa: B027
        """A cycle raised ``error`` (``work`` is None when :meth:`next_work` did): leave the state consistent.

        The run has already put the error in the cycle's record; by default there is nothing else to do.
        """

    def conclude(self, state: OrchestrationState, verdict: Verdict) -> Conclusion:
        """The answer and message of the finished run (``state`` is final)."""
        return Conclusion(answer=None, message=verdict.status)
