"""A Hypothesis state machine over step status transitions (spec 001; FR-052/053).

Random transition attempts and repairs are applied to a run's working copy (:class:`RunState`), the only way a
run's steps change; a plain list of statuses is the model of what must be allowed. Invariants: no backward
transition, strict order, errors cleared when a step completes, fails or is found invalid, snapshots that never
change afterwards.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from aeon_kernel import OrchestrationState, Plan, PlanStep, StepStatus
from aeon_kernel.errors import StateTransitionError
from aeon_kernel.runtime.state import RunState

ALLOWED = {
    StepStatus.PENDING: {StepStatus.RUNNING},
    StepStatus.RUNNING: {StepStatus.COMPLETE, StepStatus.FAILED, StepStatus.INVALID},
    StepStatus.COMPLETE: set(),
    StepStatus.FAILED: set(),
    StepStatus.INVALID: {StepStatus.FAILED},  # spec 003: a refinement replaces it, or it fails
}
ORDER = {
    StepStatus.COMPLETE: 2,
    StepStatus.FAILED: 2,
    StepStatus.RUNNING: 1,
    StepStatus.INVALID: 1,
    StepStatus.PENDING: 0,
}
HOLDING = (StepStatus.RUNNING, StepStatus.INVALID)


class StepTransitions(RuleBasedStateMachine):
    run: RunState
    model: list[StepStatus]

    @initialize(n=st.integers(min_value=1, max_value=8))
    def make_run(self, n: int) -> None:
        plan = Plan(
            goal="g", steps=tuple(PlanStep(step_id=f"s{i}", description=f"step {i}") for i in range(n))
        )
        self.run = RunState(OrchestrationState(run_id="r", request="q", plan=plan, ttl_remaining=10))
        self.model = [StepStatus.PENDING] * n
        self.errors: list[tuple[str, ...]] = [()] * n  # the model of each step's errors
        self.history: list[list[StepStatus]] = [list(self.model)]
        self.snapshots: list[Plan] = [
            self.plan()
        ]  # one per entry of history, kept to check they never change

    def plan(self) -> Plan:
        plan = self.run.snapshot().plan
        assert plan is not None
        return plan

    def near_the_frontier(self) -> list[int]:
        """Where a mistake would show: the last finished step, the first unfinished one, the one after it."""
        done = sum(s.is_terminal for s in self.model)  # the model keeps finished steps first
        return [i for i in (done - 1, done, done + 1) if 0 <= i < len(self.model)]

    def try_move(self, index: int, target: StepStatus) -> None:
        """Ask the run to move step ``index`` to ``target``; the reference model says whether it must agree."""
        current = self.model[index]
        earlier_done = all(s in (StepStatus.COMPLETE, StepStatus.FAILED) for s in self.model[:index])
        legal = target in ALLOWED[current] and (target is not StepStatus.RUNNING or earlier_done)
        before = self.run.snapshot()
        try:
            step, previous = self.run.transition(f"s{index}", target)
        except StateTransitionError:
            assert not legal, f"{current.value} -> {target.value} at {index} should be allowed ({self.model})"
            assert self.run.snapshot() == before
            return
        assert legal, f"{current.value} -> {target.value} at {index} should be refused ({self.model})"
        assert previous is current and step.status is target
        self.model[index] = target
        if target.is_terminal or target is StepStatus.INVALID:
            self.errors[index] = ()
        self.history.append(list(self.model))
        self.snapshots.append(self.plan())

    @rule(data=st.data(), status=st.sampled_from(list(StepStatus)))
    def attempt(self, data: st.DataObject, status: StepStatus) -> None:
        """Any move on any step, most often near the frontier, where forbidden moves (a restart) matter."""
        anywhere = st.integers(min_value=0, max_value=len(self.model) - 1)
        self.try_move(data.draw(st.sampled_from(self.near_the_frontier()) | anywhere), status)

    @precondition(lambda self: not all(s.is_terminal for s in self.model))
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """Start the first unfinished step, or finish the running one, so runs reach finished steps."""
        index = sum(s.is_terminal for s in self.model)
        if self.model[index] is StepStatus.PENDING:
            self.try_move(index, StepStatus.RUNNING)
        else:
            self.try_move(index, data.draw(st.sampled_from([StepStatus.COMPLETE, StepStatus.FAILED])))

    @rule(data=st.data(), message=st.text(min_size=1, max_size=10))
    def validator_reports_an_error(self, data: st.DataObject, message: str) -> None:
        index = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        step = self.run.step(f"s{index}")
        if not step.status.is_terminal:
            self.run.replace_step(step.model_copy(update={"errors": (*step.errors, message)}))
            self.errors[index] = (*self.errors[index], message)

    @rule(data=st.data())
    def replacing_a_step_cannot_change_its_status(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        step = self.run.step(f"s{index}")
        other = data.draw(st.sampled_from([s for s in StepStatus if s is not step.status]))
        before = self.run.snapshot()
        try:
            self.run.replace_step(step.model_copy(update={"status": other}))
        except StateTransitionError:
            assert self.run.snapshot() == before
            return
        raise AssertionError("replace_step changed a status")

    @invariant()
    def statuses_match_the_model(self) -> None:
        assert [s.status for s in self.plan().steps] == self.model

    @invariant()
    def errors_match_the_model(self) -> None:
        assert [s.errors for s in self.plan().steps] == self.errors

    @invariant()
    def strict_order(self) -> None:
        ranks = [ORDER[s] for s in self.model]
        assert ranks == sorted(ranks, reverse=True), self.model
        assert sum(s in HOLDING for s in self.model) <= 1
        Plan.model_validate(self.plan().model_dump())  # the plan's own validator agrees

    @invariant()
    def never_backwards(self) -> None:
        for earlier, later in zip(self.history, self.history[1:], strict=False):
            for a, b in zip(earlier, later, strict=True):
                assert ORDER[b] >= ORDER[a]

    @invariant()
    def old_snapshots_never_change(self) -> None:
        for snapshot, statuses in zip(self.snapshots, self.history, strict=True):
            assert [s.status for s in snapshot.steps] == statuses

    @invariant()
    def finished_steps_have_no_errors(self) -> None:
        for step in self.plan().steps:
            if step.status.is_terminal:
                assert step.errors == ()

    @invariant()
    def next_pending_is_the_first_pending_when_nothing_runs(self) -> None:
        nxt = self.plan().next_pending()
        if any(s in HOLDING for s in self.model) or StepStatus.PENDING not in self.model:
            assert nxt is None
        else:
            assert nxt is not None and nxt.step_id == f"s{self.model.index(StepStatus.PENDING)}"


TestStepTransitions = StepTransitions.TestCase
