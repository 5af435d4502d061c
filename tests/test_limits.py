"""Bounded inputs (issue 13 item 13): plans, tool arguments and tool results have size limits, enforced with a
clear error wherever they come from — the model, a planner plugin or a tool — so a runaway never fills the disk."""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import ConfigError, Engine, Plan, Planner, Tool, ValidationError, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.invocation import MAX_JSON_CHARS, json_problem
from aeon_plugins.schema_validator import SchemaValidator
from tests.support.builders import plan, tool_step

V = SchemaValidator()


def steps(count: int) -> dict[str, Any]:
    return plan(*(tool_step(str(i), "echo", {"message": "hi"}) for i in range(1, count + 1)))


def test_a_plan_with_too_many_steps_is_refused_naming_the_option() -> None:
    assert V.validate_plan(steps(1_000))
    with pytest.raises(ValidationError, match=r"1,001 steps, more than the 1,000 allowed \(max_plan_steps"):
        V.validate_plan(steps(1_001))
    assert SchemaValidator(max_plan_steps=2).validate_plan(steps(2))
    with pytest.raises(ValidationError, match="max_plan_steps"):
        SchemaValidator(max_plan_steps=2).validate_plan(steps(3))


def test_a_plan_too_large_is_refused_naming_the_option() -> None:
    big = plan(tool_step("1", "echo", {"message": "é" * 600_000}))  # 1.2 MB as UTF-8, 600,000 characters
    with pytest.raises(ValidationError, match=r"the plan take 1,200,\d+ bytes as JSON.*max_plan_bytes"):
        V.validate_plan(big)
    assert SchemaValidator(max_plan_bytes=2_000_000).validate_plan(big)


def test_tool_arguments_too_large_are_refused_naming_the_option() -> None:
    schema = {"type": "object", "properties": {"message": {"type": "string"}}}
    call = {"tool_name": "echo", "arguments": {"message": "x" * 300_000}}
    with pytest.raises(
        ValidationError, match=r"the arguments for echo take 300,015 bytes.*max_argument_bytes"
    ):
        V.validate_tool_call(call, schema)
    assert SchemaValidator(max_argument_bytes=400_000).validate_tool_call(call, schema)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "100", None])
def test_a_limit_that_is_not_a_positive_integer_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError, match="max_plan_steps must be a positive integer"):
        SchemaValidator(max_plan_steps=value)


class HugePlanner:
    """A planner plugin that writes a plan far beyond the limits, bypassing the model and its schema."""

    @hookimpl
    def aeon_register_planners(self, register: Any) -> None:
        class Huge(Planner):
            def generate_plan(self, *args: Any, **kwargs: Any) -> Plan:
                return Plan.model_validate(steps(5_000))

        register("huge", Huge)


def test_a_planner_plugin_cannot_bypass_the_validators_limits() -> None:
    config = AeonConfig(ttl=3).with_choice("planner", "huge")
    with Engine(config, plugins=[HugePlanner()]) as engine:
        result = engine.run("anything")
    assert result["status"] == "failed"
    assert result["final_state"]["plan"] is None  # never started: no step of it ran
    assert "5,000 steps, more than the 1,000 allowed" in result["final_state"]["errors"][-1]["message"]


class SetPlanner:
    """A planner plugin whose plan holds what JSON cannot (a set): only plans parse_plan read from JSON text skip
    the scheduler's check (issue 31), so this one is refused."""

    @hookimpl
    def aeon_register_planners(self, register: Any) -> None:
        class Sets(Planner):
            def generate_plan(self, *args: Any, **kwargs: Any) -> Plan:
                step = {"step_id": "1", "description": "d", "tool": "echo", "arguments": {"message": {1, 2}}}
                return Plan.model_validate({"goal": "g", "steps": [step]})

        register("sets", Sets)


def test_a_planner_plugin_cannot_hand_the_run_a_plan_that_is_not_json_data() -> None:
    with Engine(AeonConfig(ttl=3).with_choice("planner", "sets"), plugins=[SetPlanner()]) as engine:
        result = engine.run("anything")
    assert result["status"] == "failed" and result["final_state"]["plan"] is None
    assert "the plan is not JSON data" in result["final_state"]["errors"][-1]["message"]


def test_the_limits_come_from_validator_options_in_the_config() -> None:
    config = (
        AeonConfig(ttl=3)
        .with_choice("planner", "huge")
        .with_choice("validator", "schema", max_plan_steps=10_000, max_plan_bytes=10_000_000)
    )
    with Engine(config, plugins=[HugePlanner()]) as engine:
        result = engine.run("anything")
    assert result["status"] == "ttl_expired" and len(result["final_state"]["plan"]["steps"]) == 5_000
    with (
        pytest.raises(ConfigError, match="max_plan_steps"),
        Engine(AeonConfig().with_choice("validator", "schema", max_plan_steps=0)) as engine,
    ):
        engine.validator  # noqa: B018 - building it is the check


class Flood(Tool):
    name: str = "flood"
    description: str = "Returns far more text than any result should hold."
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}
    output_schema: dict[str, Any] = {}

    def invoke(self, **kwargs: Any) -> Any:
        return {"page": "x" * (MAX_JSON_CHARS // 2), "again": "y" * (MAX_JSON_CHARS // 2 + 1)}


class FloodPlugin:
    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        register("flood", Flood)


def test_a_tool_result_with_too_much_text_fails_its_step_and_is_not_kept() -> None:
    assert json_problem({"a": "x" * MAX_JSON_CHARS}) is None
    assert (
        json_problem([{"a": "x" * MAX_JSON_CHARS}, "y"]) == "it holds more than 16,000,000 characters of text"
    )
    config = AeonConfig(ttl=3).with_choice(
        "llm", "scripted", responses=[steps(1) | {"steps": [tool_step("1", "flood", {})]}]
    )
    with Engine(config, plugins=[FloodPlugin()]) as engine:
        result = engine.run("flood me")
    (step,) = result["final_state"]["plan"]["steps"]
    assert step["status"] == "failed" and "16,000,000 characters" in step["failure"]
    assert step["result"] is None
