"""A run's working copy, :class:`RunState`: the only way a run's state changes.

Checked here: spec 001's step transitions and FR-052's strict order (against a plain reference model written out
independently of :func:`aeon_kernel.models.moved_step`), errors cleared and result/failure recorded when a step
finishes, ``current_step_id`` tracking, repairs that keep a step's place and status (FR-053), append-only
histories, TTL never below zero (FR-035), the run status, and snapshots that never change once handed out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import (
    OrchestrationState,
    Plan,
    PlanStep,
    StepStatus,
    SupervisorAction,
    ToolCall,
    ValidationError,
)
from aeon_kernel.errors import StateTransitionError
from aeon_kernel.models import RunStatus
from aeon_kernel.runtime.state import RunState

P, R, C, F = StepStatus.PENDING, StepStatus.RUNNING, StepStatus.COMPLETE, StepStatus.FAILED
I = StepStatus.INVALID  # noqa: E741

#: Spec 001's allowed step transitions (and 003's running → invalid), written out here rather than taken from
#: aeon_kernel.models. Only a refinement leaves ``invalid``.
ALLOWED = {P: {R}, R: {C, F, I}, C: set(), F: set(), I: {F}}


def fresh_state(n: int = 3, errors: Sequence[tuple[str, ...]] | None = None) -> OrchestrationState:
    """A run with a plan of ``n`` pending steps s0, s1, ...; ``errors[i]`` seeds step i's errors."""
    seeded = errors if errors is not None else [()] * n
    steps = tuple(PlanStep(step_id=f"s{i}", description=f"step {i}", errors=seeded[i]) for i in range(n))
    return OrchestrationState(run_id="r", request="do it", plan=Plan(goal="g", steps=steps), ttl_remaining=10)


def statuses(state: OrchestrationState) -> list[StepStatus]:
    assert state.plan is not None
    return [s.status for s in state.plan.steps]


def step_of(state: OrchestrationState, index: int) -> PlanStep:
    assert state.plan is not None
    return state.plan.steps[index]


# --- step transitions against a plain reference model ---

N = 3


def draw_move(data: st.DataObject, model: list[StepStatus]) -> tuple[int, StepStatus]:
    """Either the model's next legal move (so runs reach finished steps) or any move, often near the frontier."""
    done = sum(s in (C, F) for s in model)  # the reference keeps finished steps first
    if done < N and data.draw(st.booleans(), label="advance"):
        return done, R if model[done] is P else data.draw(st.sampled_from([C, F]))
    near = [i for i in (done - 1, done, done + 1) if 0 <= i < N]
    index = data.draw(st.sampled_from(near) | st.integers(0, N), label="index")  # N names no step
    return index, data.draw(st.sampled_from(list(StepStatus)), label="status")


@given(seeded=st.lists(st.booleans(), min_size=N, max_size=N), moves=st.integers(0, 20), data=st.data())
def test_transitions_follow_a_plain_reference_model(
    seeded: list[bool], moves: int, data: st.DataObject
) -> None:
    initial_errors = [("seeded error",) if seed else () for seed in seeded]
    run = RunState(fresh_state(N, errors=initial_errors))
    # The reference model: plain lists, and the rules as spec 001 and FR-052 state them.
    model, errors = [P] * N, list(initial_errors)
    results: list[int | None] = [None] * N
    failures: list[str | None] = [None] * N
    current: str | None = None
    taken = [(run.snapshot(), list(model), current)]
    for _ in range(moves):
        index, target = draw_move(data, model)
        result = data.draw(st.none() | st.integers(0, 9), label="result")
        failure = data.draw(st.none() | st.text(min_size=1, max_size=3), label="failure")
        step_id = f"s{index}"
        before = run.snapshot()
        if index >= N:
            reason = f"no step '{step_id}'"
        elif target not in ALLOWED[model[index]]:
            reason = f"cannot go from {model[index].value} to {target.value}"
        elif target is R and not all(s in (C, F) for s in model[:index]):
            reason = "cannot start before every earlier step has finished"
        else:
            reason = None
        if reason is not None:
            with pytest.raises(StateTransitionError) as raised:
                run.transition(step_id, target, result=result, failure=failure)
            assert reason in str(raised.value)
            assert run.snapshot() == before  # a refused move changes nothing
        else:
            step, previous = run.transition(step_id, target, result=result, failure=failure)
            assert previous is model[index] and step.status is target
            model[index] = target
            if target in (C, F, I):
                errors[index], results[index], failures[index] = (), result, failure
            following = f"s{index + 1}" if index + 1 < N else None
            current = step_id if target in (R, I) else following
            assert step == run.step(step_id)
        snapshot = run.snapshot()
        assert snapshot.plan is not None and run.plan() is snapshot.plan
        assert statuses(snapshot) == model
        assert [s.errors for s in snapshot.plan.steps] == errors
        assert [s.result for s in snapshot.plan.steps] == results
        assert [s.failure for s in snapshot.plan.steps] == failures
        assert snapshot.current_step_id == run.current_step_id == current
        assert run.all_complete() is all(s is C for s in model)
        assert Plan.model_validate(snapshot.plan.model_dump()) == snapshot.plan  # never an invalid plan
        taken.append((snapshot, list(model), current))
    for snapshot, statuses_then, current_then in taken:  # snapshots never change once handed out
        assert statuses(snapshot) == statuses_then and snapshot.current_step_id == current_then


# --- step transitions, case by case ---


def test_happy_path_records_result_and_failure_and_leaves_earlier_snapshots_alone() -> None:
    run = RunState(fresh_state(2))
    original = run.snapshot()
    run.transition("s0", R)
    running = run.snapshot()
    run.transition("s0", C, result={"value": 15})
    done = run.snapshot()
    assert statuses(original) == [P, P]
    assert statuses(running) == [R, P]
    assert statuses(done) == [C, P]
    assert step_of(done, 0).result == {"value": 15} and step_of(running, 0).result is None
    run.transition("s1", R)
    run.transition("s1", F, failure="boom")
    failed = run.snapshot()
    assert statuses(failed) == [C, F]
    assert step_of(failed, 1).failure == "boom" and step_of(failed, 0).result == {"value": 15}
    assert statuses(done) == [C, P] and step_of(done, 1).failure is None


@pytest.mark.parametrize(
    ("path", "forbidden"),
    [
        ([], C),
        ([], F),
        ([], P),
        ([R], P),
        ([R], R),
        ([R, C], R),
        ([R, C], P),
        ([R, C], F),
        ([R, F], C),
        ([R, F], R),
    ],
)
def test_forbidden_transitions(path: list[StepStatus], forbidden: StepStatus) -> None:
    run = RunState(fresh_state(1))
    for status in path:
        run.transition("s0", status)
    before = run.snapshot()
    with pytest.raises(StateTransitionError) as info:
        run.transition("s0", forbidden)
    assert isinstance(info.value, ValidationError)
    assert f"cannot go from {run.step('s0').status.value} to {forbidden.value}" in str(info.value)
    assert statuses(run.snapshot()) == (path[-1:] or [P])  # unchanged
    assert run.snapshot() == before


def test_no_step_starts_before_earlier_steps_finish() -> None:
    run = RunState(fresh_state(3))
    with pytest.raises(StateTransitionError, match="every earlier step"):
        run.transition("s1", R)
    run.transition("s0", R)
    with pytest.raises(StateTransitionError, match="every earlier step"):
        run.transition("s1", R)
    run.transition("s0", F)
    with pytest.raises(StateTransitionError, match="every earlier step"):
        run.transition("s2", R)
    assert statuses(run.snapshot()) == [F, P, P]
    run.transition("s1", R)
    assert statuses(run.snapshot()) == [F, R, P]


def test_unknown_step() -> None:
    run = RunState(fresh_state())
    before = run.snapshot()
    with pytest.raises(StateTransitionError, match="no step 'zz'"):
        run.transition("zz", R)
    assert run.snapshot() == before


@pytest.mark.parametrize("final", [C, F])
def test_errors_are_kept_while_running_and_cleared_when_finished(final: StepStatus) -> None:
    run = RunState(fresh_state(1, errors=[("tool 'x' not found",)]))
    run.transition("s0", R)
    running = run.snapshot()
    assert step_of(running, 0).errors == ("tool 'x' not found",)
    run.transition("s0", final)
    assert step_of(run.snapshot(), 0).errors == ()
    assert step_of(running, 0).errors == ("tool 'x' not found",)  # the earlier snapshot keeps them


def test_the_current_step_follows_the_transitions() -> None:
    run = RunState(fresh_state(2))
    assert run.current_step_id is None and run.snapshot().current_step_id is None
    run.transition("s0", R)
    assert run.current_step_id == run.snapshot().current_step_id == "s0"
    run.transition("s0", C, result=1)
    assert run.current_step_id == run.snapshot().current_step_id == "s1"  # the next step to run
    run.transition("s1", R)
    assert run.current_step_id == "s1"
    run.transition("s1", F, failure="boom")
    assert run.current_step_id is None and run.snapshot().current_step_id is None
    assert statuses(run.snapshot()) == [C, F] and not run.all_complete()
    assert step_of(run.snapshot(), 1).failure == "boom"


def test_all_complete_only_when_every_step_completed() -> None:
    run = RunState(fresh_state(2))
    for step_id in ("s0", "s1"):
        assert not run.all_complete()
        run.transition(step_id, R)
        assert not run.all_complete()
        run.transition(step_id, C)
    assert run.all_complete()


# --- repairs (FR-053) ---


def test_replace_step_keeps_position_and_status() -> None:
    run = RunState(fresh_state(3, errors=[("tool 'weather' not found",)] * 3))
    before = run.snapshot()
    repaired = run.step("s1").model_copy(update={"tool": "echo", "errors": ()})
    run.replace_step(repaired)
    after = run.snapshot()
    assert after.plan is not None and [s.step_id for s in after.plan.steps] == ["s0", "s1", "s2"]
    assert step_of(after, 1) == repaired and statuses(after) == [P, P, P]
    assert step_of(after, 1).tool == "echo" and step_of(after, 1).errors == ()
    assert step_of(before, 1).tool is None  # the earlier snapshot is untouched
    assert step_of(before, 1).errors == ("tool 'weather' not found",)
    run.transition("s0", R)
    run.replace_step(
        PlanStep(step_id="s0", description="repaired", status=R)
    )  # a running step, still running
    assert step_of(run.snapshot(), 0).description == "repaired" and statuses(run.snapshot()) == [R, P, P]


@pytest.mark.parametrize("other", [R, C, F])
def test_replace_step_refuses_a_status_change(other: StepStatus) -> None:
    run = RunState(fresh_state(2))
    before = run.snapshot()
    with pytest.raises(StateTransitionError, match="may not change its status"):
        run.replace_step(run.step("s0").model_copy(update={"status": other}))
    assert run.snapshot() == before


def test_replace_step_needs_a_known_id() -> None:
    run = RunState(fresh_state())
    before = run.snapshot()
    with pytest.raises(StateTransitionError, match="no step 'zz'"):
        run.replace_step(PlanStep(step_id="zz", description="d"))
    assert run.snapshot() == before


# --- histories, TTL, run status ---


def call(n: int) -> ToolCall:
    """A tool call; a fixed timestamp, so two calls with the same ``n`` are equal."""
    return ToolCall(
        tool_name="echo",
        arguments={"n": n},
        result={"n": n},
        step_id="s0",
        timestamp="2026-01-01T00:00:00.000+00:00",
    )


def act(attempt: int) -> SupervisorAction:
    return SupervisorAction(
        action_type="json_repair",
        original_output={"text": "{"},
        repaired_output={},
        attempt_number=attempt,
        timestamp="2026-01-01T00:00:00.000+00:00",
    )


def test_end_cycle_appends_to_the_histories() -> None:
    run = RunState(fresh_state())
    s0 = run.snapshot()
    run.end_cycle([call(1)], [{"text": "a"}], [], [{"type": "X"}])
    s1 = run.snapshot()
    run.end_cycle([call(2)], [{"text": "b"}], [act(1)], [])
    s2 = run.snapshot()
    assert s0.tool_history == () and s0.llm_outputs == () and s0.errors == () and s0.supervisor_actions == ()
    assert (
        s1.tool_history == (call(1),) and s1.llm_outputs == ({"text": "a"},) and s1.supervisor_actions == ()
    )
    assert s2.tool_history == (call(1), call(2))
    assert s2.llm_outputs == ({"text": "a"}, {"text": "b"})
    assert s2.supervisor_actions == (act(1),)
    assert s2.errors == ({"type": "X"},) == s1.errors
    run.record_error({"type": "Y"})
    assert run.snapshot().errors == ({"type": "X"}, {"type": "Y"}) and s2.errors == ({"type": "X"},)
    assert s1 is not s0 and s2 is not s1


def test_end_cycle_spends_ttl_but_never_below_zero() -> None:
    run = RunState(OrchestrationState(run_id="r", request="q", ttl_remaining=2))
    seen = []
    for _ in range(4):
        run.end_cycle([], [], [], [])
        seen.append((run.snapshot().cycle, run.snapshot().ttl_remaining))
    assert seen == [(1, 1), (2, 0), (3, 0), (4, 0)]


cycles = st.lists(
    st.tuples(
        st.lists(st.integers(0, 99).map(call), max_size=2),
        st.lists(st.fixed_dictionaries({"text": st.text(max_size=3)}), max_size=2),
        st.lists(st.integers(1, 2).map(act), max_size=1),
        st.lists(st.fixed_dictionaries({"type": st.sampled_from(["X", "Y"])}), max_size=2),
        st.none() | st.fixed_dictionaries({"late": st.integers(0, 9)}),
    ),
    max_size=8,
)


@given(ttl=st.integers(0, 4), cycles=cycles)
def test_histories_only_grow_and_ttl_never_goes_below_zero(ttl: int, cycles: list[tuple[Any, ...]]) -> None:
    run = RunState(OrchestrationState(run_id="r", request="q", ttl_remaining=ttl))
    names = ("tool_history", "llm_outputs", "supervisor_actions", "errors")
    expected: dict[str, list[Any]] = {name: [] for name in names}
    taken = [(run.snapshot(), {name: () for name in names})]
    for n, (calls, outputs, actions, errors, late_error) in enumerate(cycles, 1):
        run.end_cycle(list(calls), list(outputs), list(actions), list(errors))
        for name, items in zip(names, (calls, outputs, actions, errors), strict=True):
            expected[name] += items
        if late_error is not None:
            run.record_error(late_error)
            expected["errors"].append(late_error)
        snapshot = run.snapshot()
        assert (snapshot.cycle, snapshot.ttl_remaining) == (n, max(0, ttl - n))
        assert {name: getattr(snapshot, name) for name in names} == {k: tuple(v) for k, v in expected.items()}
        assert OrchestrationState.model_validate(snapshot.model_dump()) == snapshot
        taken.append((snapshot, {k: tuple(v) for k, v in expected.items()}))
    final = taken[-1][0]
    for snapshot, histories_then in taken:
        for name in names:
            assert getattr(snapshot, name) == histories_then[name]  # unchanged since it was taken
            assert (
                getattr(final, name)[: len(histories_then[name])] == histories_then[name]
            )  # only appended to


@pytest.mark.parametrize("status", get_args(RunStatus))
def test_finish_sets_the_run_status(status: RunStatus) -> None:
    run = RunState(fresh_state())
    run.transition("s0", R)
    before = run.snapshot()
    run.finish(status)
    after = run.snapshot()
    assert run.status == after.status == status and before.status == "running"
    assert after.model_copy(update={"status": "running"}) == before  # nothing else changed


# --- snapshots ---


def test_snapshots_are_cached_until_a_change_and_never_change_afterwards() -> None:
    run = RunState(fresh_state())
    first = run.snapshot()
    assert run.snapshot() is first and run.plan() is first.plan
    run.transition("s0", R)
    second = run.snapshot()
    assert second is not first and step_of(first, 0).status is P
    assert step_of(second, 0).status is R and second.current_step_id == "s0"
    run.end_cycle([call(0)], [{"text": "{}"}], [], [{"message": "x"}])
    third = run.snapshot()
    assert (third.cycle, third.ttl_remaining, third.tool_history, third.errors) == (
        1,
        9,
        (call(0),),
        ({"message": "x"},),
    )
    assert second.cycle == 0 and second.tool_history == ()
    run.finish("completed")
    assert run.snapshot().status == "completed" and third.status == "running"


def test_a_plan_generated_during_the_run_starts_at_its_first_step() -> None:
    run = RunState(OrchestrationState(run_id="r", request="do it", ttl_remaining=5))
    before = run.snapshot()
    assert run.plan() is None and before.plan is None and run.current_step_id is None
    plan = fresh_state().plan
    assert plan is not None
    run.start_plan(plan)
    assert run.current_step_id == "s0" and run.snapshot().plan == plan
    assert before.plan is None and before.current_step_id is None
    run.transition("s0", R)
    assert (
        statuses(run.snapshot()) == [R, P, P] and plan.steps[0].status is P
    )  # the given plan is not changed
