"""A Hypothesis state machine over step status transitions (spec 001; FR-052/053).

Random transition attempts are applied to a real Plan; a plain list of statuses is the model of what must be
allowed. Invariants: no backward transition, strict order, errors cleared when a step completes or fails.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from aeon_kernel import Plan, PlanStep, StateTransitionError, StepStatus

ALLOWED = {
    StepStatus.PENDING: {StepStatus.RUNNING},
    StepStatus.RUNNING: {StepStatus.COMPLETE, StepStatus.FAILED},
    StepStatus.COMPLETE: set(),
    StepStatus.FAILED: set(),
}
ORDER = {StepStatus.COMPLETE: 2, StepStatus.FAILED: 2, StepStatus.RUNNING: 1, StepStatus.PENDING: 0}


class PlanTransitions(RuleBasedStateMachine):
    plan: Plan
    model: list[StepStatus]

    @initialize(n=st.integers(min_value=1, max_value=8))
    def make_plan(self, n: int) -> None:
        self.plan = Plan(
            goal="g", steps=tuple(PlanStep(step_id=f"s{i}", description=f"step {i}") for i in range(n))
        )
        self.model = [StepStatus.PENDING] * n
        self.history: list[list[StepStatus]] = [list(self.model)]

    @rule(data=st.data(), status=st.sampled_from(list(StepStatus)))
    def attempt(self, data: st.DataObject, status: StepStatus) -> None:
        target = status
        index = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        current = self.model[index]
        earlier_done = all(s in (StepStatus.COMPLETE, StepStatus.FAILED) for s in self.model[:index])
        legal = target in ALLOWED[current] and (target is not StepStatus.RUNNING or earlier_done)
        before = self.plan
        try:
            self.plan = self.plan.transition(f"s{index}", target)
        except StateTransitionError:
            assert not legal, f"{current.value} -> {target.value} at {index} should be allowed ({self.model})"
            assert self.plan is before
            return
        assert legal, f"{current.value} -> {target.value} at {index} should be refused ({self.model})"
        self.model[index] = target
        self.history.append(list(self.model))

    @rule(data=st.data(), message=st.text(min_size=1, max_size=10))
    def validator_reports_an_error(self, data: st.DataObject, message: str) -> None:
        index = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        step = self.plan.steps[index]
        if not step.status.is_terminal:
            self.plan = self.plan.replace_step(step.model_copy(update={"errors": (*step.errors, message)}))

    @rule(data=st.data())
    def replacing_a_step_cannot_change_its_status(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(min_value=0, max_value=len(self.model) - 1))
        step = self.plan.steps[index]
        other = next(s for s in StepStatus if s is not step.status)
        try:
            self.plan.replace_step(step.model_copy(update={"status": other}))
        except StateTransitionError:
            return
        raise AssertionError("replace_step changed a status")

    @invariant()
    def statuses_match_the_model(self) -> None:
        assert [s.status for s in self.plan.steps] == self.model

    @invariant()
    def strict_order(self) -> None:
        ranks = [ORDER[s] for s in self.model]
        assert ranks == sorted(ranks, reverse=True), self.model
        assert self.model.count(StepStatus.RUNNING) <= 1
        Plan.model_validate(self.plan.model_dump())  # the plan's own validator agrees

    @invariant()
    def never_backwards(self) -> None:
        for earlier, later in zip(self.history, self.history[1:], strict=False):
            for a, b in zip(earlier, later, strict=True):
                assert ORDER[b] >= ORDER[a]

    @invariant()
    def finished_steps_have_no_errors(self) -> None:
        for step in self.plan.steps:
            if step.status.is_terminal:
                assert step.errors == ()

    @invariant()
    def next_pending_is_the_first_pending_when_nothing_runs(self) -> None:
        nxt = self.plan.next_pending()
        if StepStatus.RUNNING in self.model or StepStatus.PENDING not in self.model:
            assert nxt is None
        else:
            assert nxt is not None and nxt.step_id == f"s{self.model.index(StepStatus.PENDING)}"


TestPlanTransitions = PlanTransitions.TestCase
