"""The spec 001 data model: validation, structure checks, exported schemas, cheap copies.

How a run *changes* its state (step transitions, repairs, histories, TTL, status) is tested on the live path,
:class:`~aeon_kernel.runtime.state.RunState`, in ``tests/runtime/test_state.py``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jsonschema
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_cli.json_schemas import export_json_schemas
from aeon_kernel import LogEntry, OrchestrationState, Plan, PlanStep, StepStatus, SupervisorAction, ToolCall
from aeon_kernel.kit import MemoryEntry
from aeon_kernel.runtime.state import RunState

P, R, C, F = StepStatus.PENDING, StepStatus.RUNNING, StepStatus.COMPLETE, StepStatus.FAILED


def make_plan(n: int = 3, **step_fields: Any) -> Plan:
    steps = tuple(PlanStep(step_id=f"s{i}", description=f"step {i}", **step_fields) for i in range(1, n + 1))
    return Plan(goal="goal", steps=steps)


def plan_with(*order: StepStatus) -> Plan:
    """A plan whose steps s1, s2, ... have the given statuses, built (and validated) directly."""
    steps = tuple(
        PlanStep(step_id=f"s{i}", description=f"step {i}", status=s) for i, s in enumerate(order, 1)
    )
    return Plan(goal="goal", steps=steps)


def statuses(plan: Plan) -> list[StepStatus]:
    return [s.status for s in plan.steps]


# --- PlanStep ---


def test_step_defaults() -> None:
    step = PlanStep(step_id="1", description="d")
    assert step.status is StepStatus.PENDING
    assert step.model_dump(exclude={"step_id", "description", "status"}) == {
        "tool": None,
        "agent": None,
        "arguments": None,
        "errors": (),
        "result": None,
        "failure": None,
    }


@pytest.mark.parametrize(
    "fields",
    [
        {"step_id": "", "description": "d"},
        {"step_id": "  ", "description": "d"},
        {"step_id": "1", "description": ""},
        {"step_id": "1", "description": " \n"},
        {"description": "d"},
        {"step_id": "1"},
        {"step_id": 1, "description": "d"},
        {"step_id": "1", "description": "d", "status": "done"},
        {"step_id": "1", "description": "d", "agent": "human"},
        {"step_id": "1", "description": "d", "errors": "not a list"},
        {"step_id": "1", "description": "d", "arguments": ["x"]},
    ],
)
def test_invalid_steps(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        PlanStep(**fields)


@pytest.mark.parametrize("tool", ["", "   "])
def test_blank_tool_means_no_tool(tool: str) -> None:
    assert PlanStep(step_id="1", description="d", tool=tool).tool is None


def test_steps_are_frozen() -> None:
    step = PlanStep(step_id="1", description="d")
    with pytest.raises(pydantic.ValidationError):
        step.status = StepStatus.RUNNING  # type: ignore[misc]


# --- Plan ---


@pytest.mark.parametrize(
    "data",
    [
        {"goal": "", "steps": [{"step_id": "1", "description": "d"}]},
        {"steps": [{"step_id": "1", "description": "d"}]},
        {"goal": "g", "steps": []},
        {"goal": "g"},
        {"goal": "g", "steps": [{"step_id": "1", "description": "a"}, {"step_id": "1", "description": "b"}]},
    ],
)
def test_invalid_plans(data: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        Plan.model_validate(data)


@pytest.mark.parametrize(
    ("order", "valid"),
    [
        ([P, P, P], True),
        ([R, P, P], True),
        ([C, R, P], True),
        ([F, C, F], True),
        ([C, F, R], True),
        ([P, C], False),
        ([P, R], False),
        ([R, R], False),
        ([R, C], False),
        ([C, P, F], False),
    ],
)
def test_plan_status_order(order: list[StepStatus], valid: bool) -> None:
    data = {
        "goal": "g",
        "steps": [{"step_id": str(i), "description": "d", "status": s.value} for i, s in enumerate(order)],
    }
    if valid:
        assert statuses(Plan.model_validate(data)) == order
    else:
        with pytest.raises(pydantic.ValidationError, match="out of order"):
            Plan.model_validate(data)


def test_unknown_fields_are_ignored() -> None:
    plan = Plan.model_validate({"goal": "g", "steps": [{"step_id": "1", "description": "d", "x": 1}], "y": 2})
    assert "x" not in plan.steps[0].model_dump()


@pytest.mark.parametrize(
    ("order", "next_index", "finished"),
    [
        ([P, P], 0, False),
        ([R, P], None, False),  # a step is running
        ([C, P], 1, False),
        ([F, P], 1, False),
        ([C, R], None, False),
        ([C, F], None, True),
        ([F, F], None, True),
    ],
)
def test_next_pending_and_is_finished(
    order: list[StepStatus], next_index: int | None, finished: bool
) -> None:
    plan = plan_with(*order)
    assert plan.next_pending() == (None if next_index is None else plan.steps[next_index])
    assert plan.is_finished is finished
    assert plan.running_step() == next((s for s in plan.steps if s.status is R), None)


# --- ToolCall ---


def test_tool_call_timestamp_defaults_to_iso_utc() -> None:
    call = ToolCall(tool_name="echo", arguments={"message": "hi"}, result={"message": "hi"}, step_id="1")
    offset = datetime.fromisoformat(call.timestamp).utcoffset()
    assert offset is not None
    assert offset.total_seconds() == 0


def test_tool_call_result_xor_error() -> None:
    assert ToolCall(tool_name="t", arguments={}, error={"message": "x"}, step_id="1").error == {
        "message": "x"
    }
    with pytest.raises(pydantic.ValidationError, match="not both"):
        ToolCall(tool_name="t", arguments={}, result={"v": 1}, error={"message": "x"}, step_id="1")


@pytest.mark.parametrize("timestamp", ["2025-01-27T10:00:00+00:00", "2025-01-27T10:00:00.123Z", "2025-01-27"])
def test_tool_call_accepts_iso_timestamps(timestamp: str) -> None:
    assert ToolCall(tool_name="t", arguments={}, step_id="1", timestamp=timestamp).timestamp == timestamp


@pytest.mark.parametrize(
    "fields",
    [
        {"timestamp": "yesterday"},
        {"timestamp": ""},
        {"timestamp": "27/01/2025"},
        {"tool_name": ""},
        {"step_id": ""},
        {"arguments": "x"},
        {"result": "not a dict"},
    ],
)
def test_invalid_tool_calls(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        ToolCall(**{"tool_name": "t", "arguments": {}, "step_id": "1", **fields})


# --- SupervisorAction ---


def action(**fields: Any) -> SupervisorAction:
    return SupervisorAction(**{"action_type": "json_repair", "original_output": {"text": "{"}, **fields})


@pytest.mark.parametrize("attempt", [1, 2])
def test_valid_actions(attempt: int) -> None:
    assert action(repaired_output={}, attempt_number=attempt).attempt_number == attempt
    assert action(error={"message": "x"}, attempt_number=attempt).method == "llm"


@pytest.mark.parametrize(
    "fields",
    [
        {"attempt_number": 1},  # neither repaired_output nor error
        {"attempt_number": 1, "repaired_output": {}, "error": {"m": 1}},
        {"attempt_number": 0, "repaired_output": {}},
        {"attempt_number": 3, "repaired_output": {}},
        {"repaired_output": {}},
        {"attempt_number": 1, "repaired_output": {}, "action_type": "rewrite"},
        {"attempt_number": 1, "repaired_output": {}, "method": "magic"},
        {"attempt_number": 1, "repaired_output": {}, "timestamp": "noon"},
    ],
)
def test_invalid_actions(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        action(**fields)


# --- LogEntry and MemoryEntry ---


def log_entry(**fields: Any) -> LogEntry:
    values = {
        "step_number": 1,
        "plan_state": None,
        "llm_output": {},
        "ttl_remaining": 0,
        "run_id": "r",
        "phase": "plan",
    }
    return LogEntry(**{**values, **fields})


def test_log_entry_defaults() -> None:
    entry = log_entry()
    assert (entry.supervisor_actions, entry.tool_calls, entry.errors) == ((), (), ())
    datetime.fromisoformat(entry.timestamp)


@pytest.mark.parametrize(
    "fields",
    [
        {"step_number": 0},
        {"step_number": -1},
        {"ttl_remaining": -1},
        {"timestamp": "now"},
        {"phase": "other"},
    ],
)
def test_invalid_log_entries(fields: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        log_entry(**fields)


def test_memory_entry_key_must_not_be_empty() -> None:
    assert MemoryEntry(key="k", value=[1]).value == [1]
    with pytest.raises(pydantic.ValidationError):
        MemoryEntry(key="", value=1)


# --- OrchestrationState ---


def state(ttl: int = 3, **fields: Any) -> OrchestrationState:
    return OrchestrationState(run_id="r", request="q", ttl_remaining=ttl, **fields)


def test_state_is_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        state().ttl_remaining = 10  # type: ignore[misc]


def test_negative_ttl_is_rejected() -> None:
    with pytest.raises(pydantic.ValidationError):
        state(ttl=-1)


def test_unknown_run_status_is_rejected() -> None:
    for status in ("running", "completed", "failed", "ttl_expired"):
        assert state(status=status).status == status
    with pytest.raises(pydantic.ValidationError):
        OrchestrationState(run_id="r", request="q", ttl_remaining=1, status="weird")  # type: ignore[arg-type]


# --- exported JSON Schemas ---

SCHEMAS = export_json_schemas()


def test_every_entity_is_exported() -> None:
    assert set(SCHEMAS) == {
        "Plan",
        "PlanStep",
        "OrchestrationState",
        "Tool",
        "ToolCall",
        "MemoryEntry",
        "SupervisorAction",
        "LogEntry",
        # spec 004: the flow manifests
        "FlowSpec",
        "ContextFile",
        "MemoryFile",
        # spec 003 (003-models.md)
        "TaskProfile",
        "ConvergenceAssessment",
        "SemanticValidationReport",
        "ValidationIssue",
        "RefinementAction",
        "ExecutionPass",
        "ExecutionHistory",
    }


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_exported_schemas_are_valid_json_schemas(name: str) -> None:
    schema = SCHEMAS[name]
    jsonschema.validators.validator_for(schema).check_schema(schema)


def validator(name: str) -> jsonschema.protocols.Validator:
    schema = SCHEMAS[name]
    return jsonschema.validators.validator_for(schema)(schema)  # type: ignore[no-any-return]


def test_a_real_plan_validates_against_the_plan_schema() -> None:
    plan = {
        "goal": "add 5 and 10, then explain",
        "steps": [
            {"step_id": "1", "description": "add", "status": "complete", "tool": "calculator", "errors": []},
            {"step_id": "2", "description": "explain", "status": "pending", "agent": "llm"},
        ],
    }
    Plan.model_validate(plan)
    validator("Plan").validate(plan)
    for order in ([R, P, P], [C, F, R], [F, C, C]):
        validator("Plan").validate(plan_with(*order).model_dump(mode="json"))


@pytest.mark.parametrize(
    "bad",
    [
        {"steps": [{"step_id": "1", "description": "d"}]},
        {"goal": "g", "steps": []},
        {"goal": "g", "steps": [{"step_id": "1", "description": "d", "status": "done"}]},
        {"goal": "g", "steps": [{"step_id": "1"}]},
        {"goal": "g", "steps": [{"step_id": "1", "description": "d", "agent": "human"}]},
    ],
)
def test_invalid_plans_fail_the_plan_schema(bad: dict[str, Any]) -> None:
    assert not validator("Plan").is_valid(bad)


def test_dumped_records_validate_against_their_schemas() -> None:
    call = ToolCall(tool_name="echo", arguments={"message": "hi"}, result={"message": "hi"}, step_id="1")
    act = action(repaired_output={"a": 1}, attempt_number=2)
    run = RunState(state(plan=make_plan(2)))  # a snapshot the kernel builds (without re-validating it)
    run.transition("s1", R)
    run.end_cycle([call], [{"text": "{}"}], [act], [{"type": "X"}])
    s = run.snapshot()
    assert s.plan is not None and statuses(s.plan) == [R, P]
    entry = log_entry(
        plan_state=s.plan.model_dump(mode="json"), tool_calls=(call,), supervisor_actions=(act,)
    )
    validator("ToolCall").validate(call.model_dump(mode="json"))
    validator("SupervisorAction").validate(act.model_dump(mode="json"))
    validator("OrchestrationState").validate(s.model_dump(mode="json"))
    validator("LogEntry").validate(entry.model_dump(mode="json"))
    validator("MemoryEntry").validate(MemoryEntry(key="k", value={"x": 1}).model_dump(mode="json"))
    assert not validator("SupervisorAction").is_valid({**act.model_dump(mode="json"), "attempt_number": 3})
    assert not validator("LogEntry").is_valid({**entry.model_dump(mode="json"), "step_number": 0})


# --- cheap copies and kernel-built instances (FrozenModel) ---


@given(
    update=st.fixed_dictionaries(
        {},
        optional={
            "status": st.sampled_from(list(StepStatus)),
            "result": st.integers() | st.none(),
            "errors": st.lists(st.text(max_size=3), max_size=2).map(tuple),
        },
    )
)
def test_model_copy_matches_pydantics_own(update: dict[str, Any]) -> None:
    step = PlanStep(step_id="1", description="add", tool="calculator", arguments={"expression": "1+1"})
    ours = step.model_copy(update=update)
    theirs = pydantic.BaseModel.model_copy(step, update=update)
    assert ours == theirs and ours is not step
    assert ours.model_fields_set == theirs.model_fields_set
    assert ours.model_dump() == theirs.model_dump()
    with pytest.raises(pydantic.ValidationError):
        ours.status = StepStatus.FAILED  # still frozen


def test_a_plan_copy_keeps_its_index_cache_private_to_itself() -> None:
    plan = Plan(
        goal="g", steps=[PlanStep(step_id="a", description="x"), PlanStep(step_id="b", description="y")]
    )
    assert plan.index_of("b") == 1
    copy = plan.model_copy(update={"goal": "h"})
    assert copy.index_of("b") == 1 and copy.goal == "h" and plan.goal == "g"
    assert copy.__pydantic_private__ is not plan.__pydantic_private__


@pytest.mark.parametrize("deep", [False, True])
def test_a_plan_copy_with_other_steps_looks_steps_up_in_its_own_steps(deep: bool) -> None:
    """Regression: a copy given other ``steps`` kept the original's cached index (wrong step, or KeyError)."""
    a, b, c = (PlanStep(step_id=i, description=f"step {i}") for i in "abc")
    plan = Plan(goal="g", steps=(a, b))
    assert plan.step("a") == a and plan.index_of("b") == 1  # the original's index is now cached
    swapped = plan.model_copy(update={"steps": (b, a)}, deep=deep)
    assert (swapped.index_of("a"), swapped.index_of("b")) == (1, 0)
    assert swapped.step("a") == a and swapped.step("b") == b
    grown = plan.model_copy(update={"steps": (c, a, b)}, deep=deep)
    assert [grown.index_of(i) for i in "abc"] == [1, 2, 0]
    assert grown.step("c") == c and grown.step("b") == b
    shrunk = plan.model_copy(update={"steps": (b,)}, deep=deep)
    assert shrunk.step("b") == b
    with pytest.raises(KeyError):
        shrunk.index_of("a")
    assert plan.step("a") == a and plan.index_of("b") == 1  # the original still answers from its own steps


def test_trusted_needs_every_field_and_builds_an_equal_instance() -> None:
    fields = {
        "tool_name": "echo",
        "arguments": {"text": "hi"},
        "result": {"text": "hi"},
        "error": None,
        "timestamp": "2026-11-26T00:00:00.000+00:00",
        "step_id": "1",
        "duration_ms": 0.5,
    }
    assert ToolCall.trusted(**fields) == ToolCall(**fields)
    del fields["duration_ms"]
    with pytest.raises(TypeError, match=r"missing \['duration_ms'\]"):
        ToolCall.trusted(**fields)
    plan = Plan.trusted(goal="g", steps=(PlanStep(step_id="a", description="x"),))
    assert plan.index_of("a") == 0 and plan.__pydantic_private__ == {"_index": {"a": 0}}


def test_utc_now_is_the_current_time_in_iso_8601_with_milliseconds() -> None:
    from datetime import UTC

    from aeon_kernel.models import utc_now

    for _ in range(3):  # the first call may format a new second, later ones reuse it
        before = datetime.now(UTC)
        stamp = utc_now()
        after = datetime.now(UTC)
        parsed = datetime.fromisoformat(stamp)
        assert len(stamp) == len("2026-11-26T03:10:43.721+00:00") and stamp.endswith("+00:00")
        assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= parsed <= after
