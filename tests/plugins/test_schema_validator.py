"""The ``schema`` validator (FR-024…027): every failure is an aeon ValidationError listing each problem."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from aeon_kernel import PlanStep, ToolRegistry, ValidationError, Validator
from aeon_kernel.kit import StepToolCheck
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.schema_validator import SchemaValidator, aeon_register_validators

V = SchemaValidator()


def plan(*steps: dict[str, Any], goal: Any = "add numbers") -> dict[str, Any]:
    return {"goal": goal, "steps": list(steps)}


def step(step_id: str = "1", description: str = "do it", **extra: Any) -> dict[str, Any]:
    return {"step_id": step_id, "description": description, **extra}


def plan_errors(plan_dict: Any) -> list[str]:
    with pytest.raises(ValidationError) as info:
        V.validate_plan(plan_dict)
    assert info.value.errors
    assert str(info.value).startswith(("invalid plan", "a plan must be"))
    return info.value.errors


# --- validate_plan ---


@pytest.mark.parametrize(
    "plan_dict",
    [
        plan(step()),
        plan(step("1", tool="calculator"), step("2", agent="llm"), step("3")),
        plan(
            step("1", status="complete"), step("2", status="failed"), step("3", status="running"), step("4")
        ),
        plan(step("1", status="complete"), step("2", status="complete")),
        plan(step(arguments={"expression": "1+1"}, errors=["old"])),
    ],
)
def test_valid_plans(plan_dict: dict[str, Any]) -> None:
    before = copy.deepcopy(plan_dict)
    assert V.validate_plan(plan_dict) is True
    assert plan_dict == before


def test_missing_goal() -> None:
    errors = plan_errors({"steps": [step()]})
    assert any(e.startswith("at goal:") and "required" in e.lower() for e in errors), errors


@pytest.mark.parametrize("goal", ["", 5, None])
def test_bad_goal(goal: Any) -> None:
    errors = plan_errors(plan(step(), goal=goal))
    assert any(e.startswith("at goal:") for e in errors), errors


@pytest.mark.parametrize("steps", [[], None, "step 1", {"step_id": "1"}])
def test_steps_must_be_a_non_empty_list(steps: Any) -> None:
    errors = plan_errors({"goal": "g", "steps": steps})
    assert any(e.startswith("at steps") for e in errors), errors


def test_duplicate_step_ids() -> None:
    errors = plan_errors(plan(step("1"), step("2"), step("1")))
    assert any("unique" in e and "'1'" in e for e in errors), errors


@pytest.mark.parametrize("description", ["", "   ", "\n\t"])
def test_blank_description(description: str) -> None:
    errors = plan_errors(plan(step("1"), step("2", description=description)))
    assert any(e.startswith("at steps.1.description:") for e in errors), errors


@pytest.mark.parametrize("step_id", ["", "  "])
def test_blank_step_id(step_id: str) -> None:
    errors = plan_errors(plan(step(step_id)))
    assert any(e.startswith("at steps.0.step_id:") for e in errors), errors


def test_missing_step_fields_are_each_reported() -> None:
    errors = plan_errors(plan({"tool": "echo"}))
    assert any(e.startswith("at steps.0.step_id:") for e in errors), errors
    assert any(e.startswith("at steps.0.description:") for e in errors), errors


@pytest.mark.parametrize(
    "statuses",
    [
        ["pending", "complete"],
        ["running", "complete"],
        ["pending", "running"],
        ["running", "running"],
        ["complete", "pending", "failed"],
    ],
)
def test_out_of_order_statuses(statuses: list[str]) -> None:
    errors = plan_errors(plan(*(step(str(i), status=s) for i, s in enumerate(statuses))))
    assert any("out of order" in e for e in errors), errors


def test_unknown_status() -> None:
    errors = plan_errors(plan(step(status="done")))
    assert any(e.startswith("at steps.0.status:") for e in errors), errors


@pytest.mark.parametrize("agent", ["human", "LLM", "", 1])
def test_agent_other_than_llm(agent: Any) -> None:
    errors = plan_errors(plan(step(agent=agent)))
    assert any(e.startswith("at steps.0.agent:") for e in errors), errors


@pytest.mark.parametrize("value", [None, [], "plan", 5, ["goal", "steps"]])
def test_non_dict_plans(value: Any) -> None:
    errors = plan_errors(value)
    assert errors == [f"a plan must be a JSON object, got {type(value).__name__}"]


def test_every_problem_is_listed_at_once() -> None:
    errors = plan_errors({"goal": "", "steps": [step("1", description=""), step("2", agent="robot")]})
    assert len(errors) >= 3
    assert {e.split(":")[0] for e in errors} >= {"at goal", "at steps.0.description", "at steps.1.agent"}


# --- validate_llm_output ---

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("output", [{}, {"anything": [1, 2]}])
def test_llm_output_without_schema_must_be_an_object(output: dict[str, Any]) -> None:
    assert V.validate_llm_output(output) is True


@pytest.mark.parametrize("output", ["text", ["a"], 5, None])
def test_llm_output_without_schema_rejects_non_objects(output: Any) -> None:
    with pytest.raises(ValidationError, match="must be a JSON object"):
        V.validate_llm_output(output)


def test_llm_output_with_schema() -> None:
    assert V.validate_llm_output({"answer": "15"}, ANSWER) is True
    with pytest.raises(ValidationError) as info:
        V.validate_llm_output({"answer": 15, "extra": True}, ANSWER)
    assert len(info.value.errors) == 2
    assert any("'extra'" in e for e in info.value.errors)
    assert any(e.startswith("at $.answer:") and "'string'" in e for e in info.value.errors)


def test_llm_output_schema_may_accept_non_objects() -> None:
    assert V.validate_llm_output([1, 2], {"type": "array", "items": {"type": "integer"}}) is True
    with pytest.raises(ValidationError, match=r"at \$\[1\]"):
        V.validate_llm_output([1, "2"], {"type": "array", "items": {"type": "integer"}})


# --- validate_tool_call ---

CALC_SCHEMA = CalculatorTool().input_schema


def test_valid_tool_call() -> None:
    call = {"tool_name": "calculator", "arguments": {"expression": "1 + 1"}}
    assert V.validate_tool_call(call, CALC_SCHEMA) is True


@pytest.mark.parametrize("arguments", [None, "1 + 1", ["1 + 1"], 5])
def test_tool_call_arguments_must_be_an_object(arguments: Any) -> None:
    with pytest.raises(ValidationError, match="arguments for calculator must be a JSON object"):
        V.validate_tool_call({"tool_name": "calculator", "arguments": arguments}, CALC_SCHEMA)


def test_tool_call_without_arguments() -> None:
    with pytest.raises(ValidationError, match="must be a JSON object, got NoneType"):
        V.validate_tool_call({"tool_name": "calculator"}, CALC_SCHEMA)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({}, "'expression' is a required property"),
        ({"expression": 15}, "15 is not of type 'string'"),
        ({"expression": ""}, "should be non-empty"),
        ({"expression": "1", "x": 1}, "Additional properties are not allowed"),
    ],
)
def test_tool_call_schema_violations(arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as info:
        V.validate_tool_call({"tool_name": "calculator", "arguments": arguments}, CALC_SCHEMA)
    assert any(problem in e for e in info.value.errors), info.value.errors
    assert "arguments for calculator" in str(info.value)


def test_tool_call_must_be_a_dict() -> None:
    with pytest.raises(ValidationError, match="a tool call must be a JSON object"):
        V.validate_tool_call([{"expression": "1"}], CALC_SCHEMA)  # type: ignore[arg-type]


# --- validate_step_tool ---

REGISTRY = ToolRegistry([CalculatorTool(), EchoTool()])


@pytest.mark.parametrize(
    "the_step",
    [
        PlanStep(step_id="1", description="think", agent="llm"),
        PlanStep(step_id="1", description="add", tool="calculator"),
        PlanStep(step_id="1", description="add", tool="echo", agent="llm"),
    ],
)
def test_valid_steps_come_back_unchanged(the_step: PlanStep) -> None:
    check = V.validate_step_tool(the_step, REGISTRY)
    assert isinstance(check, StepToolCheck)
    assert check.valid is True
    assert check.error is None
    assert check.step == the_step


def test_unknown_tool_fills_errors_on_a_copy() -> None:
    original = PlanStep(step_id="1", description="look up the weather", tool="weather")
    check = V.validate_step_tool(original, REGISTRY)
    assert check.valid is False
    assert check.error is not None
    assert "'weather'" in check.error
    assert "not found" in check.error
    assert "calculator" in check.error and "echo" in check.error  # lists what is available
    assert check.step.errors == (check.error,)
    assert check.step.tool == "weather"
    assert check.step.model_dump(exclude={"errors"}) == original.model_dump(exclude={"errors"})
    assert original.errors == ()  # the original is never changed


def test_tool_takes_precedence_over_agent() -> None:
    check = V.validate_step_tool(PlanStep(step_id="1", description="d", tool="nope", agent="llm"), REGISTRY)
    assert check.valid is False
    assert "'nope'" in (check.error or "")


def test_unknown_tool_with_an_empty_registry() -> None:
    check = V.validate_step_tool(PlanStep(step_id="1", description="d", tool="echo"), ToolRegistry())
    assert check.valid is False
    assert "none" in (check.error or "")


@pytest.mark.parametrize("tool", [None, "", "   "])
def test_no_tool_and_no_agent(tool: str | None) -> None:
    original = PlanStep(step_id="s7", description="do something", tool=tool)
    check = V.validate_step_tool(original, REGISTRY)
    assert check.valid is False
    assert check.error is not None
    assert "'s7'" in check.error
    assert check.step.errors == (check.error,)
    assert original.errors == ()


def test_existing_errors_are_kept() -> None:
    original = PlanStep(step_id="1", description="d", tool="nope", errors=("earlier",))
    check = V.validate_step_tool(original, REGISTRY)
    assert check.step.errors == ("earlier", check.error)
    assert original.errors == ("earlier",)


def test_registered_as_the_schema_validator() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_validators(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["schema"]
    assert isinstance(registered[0][1](), Validator)
