"""The loop's working copy of a run: same rules and same snapshots as the immutable OrchestrationState path."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import OrchestrationState, Plan, PlanStep, StateTransitionError, StepStatus, ToolCall
from aeon_kernel.runtime.state import RunState

P, R, C, F = StepStatus.PENDING, StepStatus.RUNNING, StepStatus.COMPLETE, StepStatus.FAILED


def fresh_state(n: int = 3) -> OrchestrationState:
    steps = [PlanStep(step_id=f"s{i}", description=f"step {i}", tool="echo") for i in range(n)]
    return OrchestrationState(run_id="r", request="do it", plan=Plan(goal="g", steps=steps), ttl_remaining=10)


moves = st.lists(st.tuples(st.integers(0, 2), st.sampled_from([R, C, F]), st.integers(0, 9)), max_size=12)


@given(moves)
def test_transitions_agree_with_the_immutable_model(sequence: list[tuple[int, StepStatus, int]]) -> None:
    model, run = fresh_state(), RunState(fresh_state())
    for index, status, value in sequence:
        step_id = f"s{index}"
        before = model.plan.step(step_id).status  # type: ignore[union-attr]
        try:
            model = model.transition(step_id, status, result=value if status is C else None)
        except StateTransitionError as expected:
            with pytest.raises(StateTransitionError) as raised:
                run.transition(step_id, status, result=value if status is C else None)
            assert str(raised.value) == str(expected)
        else:
            step, previous = run.transition(step_id, status, result=value if status is C else None)
            assert step == model.plan.step(step_id) and previous is before  # type: ignore[union-attr]
        assert run.snapshot() == model
        Plan.model_validate(run.plan().model_dump())  # type: ignore[union-attr]  # still a valid plan


def test_snapshots_are_cached_until_a_change_and_never_change_afterwards() -> None:
    run = RunState(fresh_state())
    first = run.snapshot()
    assert run.snapshot() is first and run.plan() is first.plan
    run.transition("s0", R)
    second = run.snapshot()
    assert second is not first and first.plan.steps[0].status is P  # type: ignore[union-attr]
    assert second.plan.steps[0].status is R and second.current_step_id == "s0"  # type: ignore[union-attr]
    call = ToolCall(tool_name="echo", arguments={}, result={}, step_id="s0")
    run.end_cycle([call], [{"text": "{}"}], [], [{"message": "x"}])
    third = run.snapshot()
    assert (third.cycle, third.ttl_remaining, third.tool_history, third.errors) == (
        1,
        9,
        (call,),
        ({"message": "x"},),
    )
    assert second.cycle == 0 and second.tool_history == ()
    run.finish("completed")
    assert run.snapshot().status == "completed" and third.status == "running"


def test_a_finished_step_moves_the_current_step_on() -> None:
    run = RunState(fresh_state(2))
    run.transition("s0", R)
    run.transition("s0", C, result=1)
    assert run.current_step_id == "s1"
    run.transition("s1", R)
    run.transition("s1", F, failure="boom")
    assert run.current_step_id is None and not run.all_complete()
    assert run.snapshot().plan.steps[1].failure == "boom"  # type: ignore[union-attr]


def test_unknown_steps_and_status_changing_repairs_are_refused() -> None:
    run = RunState(fresh_state())
    with pytest.raises(StateTransitionError, match="no step 'nope'"):
        run.transition("nope", R)
    run.transition("s0", R)
    with pytest.raises(StateTransitionError, match="may not change its status"):
        run.replace_step(PlanStep(step_id="s0", description="other", tool="echo"))
    run.replace_step(PlanStep(step_id="s0", description="repaired", tool="echo", status=R))
    assert run.snapshot().plan.steps[0].description == "repaired"  # type: ignore[union-attr]


def test_a_plan_generated_during_the_run_starts_at_its_first_step() -> None:
    run = RunState(OrchestrationState(run_id="r", request="do it", ttl_remaining=5))
    assert run.plan() is None and run.snapshot().plan is None
    run.start_plan(fresh_state().plan)  # type: ignore[arg-type]
    assert run.current_step_id == "s0" and run.snapshot().plan == fresh_state().plan
