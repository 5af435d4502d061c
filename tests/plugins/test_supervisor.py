"""The default supervisor (FR-028…033, FR-050/051, FR-066): deterministic first, two attempts, nothing new."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aeon_kernel import SupervisorAction, SupervisorError, ToolRegistry
from aeon_kernel.kit import RepairScope
from aeon_kernel.llm.client import ModelClient
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.planning import normalize_plan
from aeon_plugins.planning.prompts import plan_schema
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import GENERIC_PLAN_SCHEMA, REPAIR_SYSTEM_PROMPT, DefaultSupervisor, confined

ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
CALC_SCHEMA = CalculatorTool().input_schema


def make(responses: list[Any]) -> tuple[DefaultSupervisor, ScriptedLLM, list[SupervisorAction]]:
    scripted = ScriptedLLM(responses)
    tools = ToolRegistry([EchoTool(), CalculatorTool()])
    supervisor = DefaultSupervisor(ModelClient(scripted), SchemaValidator(), tools)
    return supervisor, scripted, []


@pytest.mark.parametrize(
    "text",
    [
        '```json\n{"answer": "15"}\n```',
        '{"answer": "15",}',
        '{"answer": "15"',
        'Sure! Here it is: {"answer": "15"} Hope that helps.',
        "{'answer': '15'}",
    ],
)
def test_repair_json_fixes_common_breakage_without_the_model(text: str) -> None:
    supervisor, scripted, actions = make([])
    assert supervisor.repair_json(text, ANSWER_SCHEMA, record=actions.append) == {"answer": "15"}
    assert scripted.prompts == []
    assert [(a.method, a.attempt_number, a.action_type) for a in actions] == [
        ("deterministic", 1, "json_repair")
    ]


def test_repair_json_asks_the_model_with_the_exact_error_and_a_repair_prompt() -> None:
    supervisor, scripted, actions = make(['{"answer": "15"}'])
    assert supervisor.repair_json('{"answer": 15}', ANSWER_SCHEMA, record=actions.append) == {"answer": "15"}
    (prompt,) = scripted.prompts
    assert "15 is not of type 'string'" in prompt["prompt"]
    assert prompt["system_prompt"] == REPAIR_SYSTEM_PROMPT  # FR-028: same model, reduced repair prompt
    assert [(a.method, a.attempt_number) for a in actions] == [("llm", 1)]


def test_two_attempts_at_most_then_supervisor_error() -> None:
    supervisor, scripted, actions = make(["nope", '{"answer": 1}', '{"answer": "never asked"}'])
    with pytest.raises(SupervisorError) as info:
        supervisor.repair_json("garbage", ANSWER_SCHEMA, record=actions.append)
    assert len(scripted.prompts) == 2
    assert [(a.attempt_number, a.error is not None) for a in actions] == [(1, True), (2, True)]
    assert info.value.attempts == 2 and "1 is not of type 'string'" in (info.value.last_error or "")
    # attempt 2 is shown the error of attempt 1's answer
    assert "no JSON could be recovered" in scripted.prompts[1]["prompt"]


def test_more_than_two_attempts_is_refused() -> None:
    supervisor, _, _ = make([])
    with pytest.raises(ValueError, match="FR-050"):
        supervisor.repair_json("x", max_attempts=3)


def test_repair_json_rejects_a_tool_the_original_text_did_not_name() -> None:
    supervisor, _, actions = make(['{"tool": "calculator"}', '{"tool": "echo"}'])
    assert supervisor.repair_json('{"tool": "echo"', None, record=actions.append) == {"tool": "echo"}
    needs_tool = {"type": "object", "required": ["tool"]}
    supervisor, _, actions = make(['{"tool": "calculator"}', '{"tool": "calculator"}'])
    with pytest.raises(SupervisorError, match="calculator"):
        supervisor.repair_json("{oops", needs_tool, record=actions.append)


def test_repair_tool_call_keeps_the_tool_and_validates_arguments() -> None:
    supervisor, scripted, actions = make(['{"expression": "2 + 2"}'])
    call = {"tool_name": "calculator", "arguments": {"expr": "2 + 2"}}
    repaired = supervisor.repair_tool_call(call, CALC_SCHEMA, record=actions.append)
    assert repaired == {"tool_name": "calculator", "arguments": {"expression": "2 + 2"}}
    assert "'expression' is a required property" in scripted.prompts[0]["prompt"]
    assert scripted.prompts[0]["json_schema"] is None  # scripted adapter cannot constrain; never sent


def test_repair_tool_call_parses_arguments_given_as_a_json_string() -> None:
    supervisor, scripted, actions = make([])
    call = {"tool_name": "calculator", "arguments": '{"expression": "1+1",}'}
    assert supervisor.repair_tool_call(call, CALC_SCHEMA, record=actions.append)["arguments"] == {
        "expression": "1+1"
    }
    assert scripted.prompts == [] and actions[0].method == "deterministic"


def test_repair_plan_normalises_structure_deterministically() -> None:
    supervisor, scripted, actions = make([])
    broken = {
        "plan": {
            "goal": "g",
            "steps": [
                {"id": "a", "name": "first", "tool": "echo"},
                {"id": "a", "action": "second", "agent": "llm", "status": "complete"},
            ],
        }
    }
    repaired = supervisor.repair_plan(broken, record=actions.append)
    assert repaired["steps"][0] == {"step_id": "1", "tool": "echo", "description": "first"}
    assert repaired["steps"][1]["step_id"] == "2" and "status" not in repaired["steps"][1]
    assert scripted.prompts == []


def test_repair_plan_reads_a_tool_given_under_another_name_as_named_by_the_plan() -> None:
    """FR-032 counts ``tool_name``/``function`` as naming the tool; the repair moves it to ``tool``."""
    supervisor, scripted, actions = make([])
    broken = {
        "goal": "g",
        "steps": [{"step_id": "1", "description": "d", "tool_name": "echo", "args": {"message": "hi"}}],
    }
    repaired = supervisor.repair_plan(broken, record=actions.append)
    assert repaired["steps"] == [
        {"step_id": "1", "description": "d", "tool": "echo", "arguments": {"message": "hi"}}
    ]
    assert scripted.prompts == [] and actions[0].method == "deterministic"


def test_repair_json_leaves_a_text_cut_off_mid_value_to_the_model() -> None:
    """Closing ``{"answer": "The sum is 1`` would change the answer: the model is asked instead."""
    supervisor, scripted, actions = make(['{"answer": "The sum is 15"}'])
    assert supervisor.repair_json('{"answer": "The sum is 1', ANSWER_SCHEMA, record=actions.append) == {
        "answer": "The sum is 15"
    }
    assert "cut off inside a string" in scripted.prompts[0]["prompt"]
    assert [(a.method, a.attempt_number) for a in actions] == [("llm", 1)]


def test_repair_plan_rejects_added_tools_then_accepts_a_faithful_repair() -> None:
    original = {"goal": "g", "steps": [{"step_id": "1", "tool": "echo"}]}
    added = {"goal": "g", "steps": [{"step_id": "1", "description": "d", "tool": "calculator"}]}
    faithful = {"goal": "g", "steps": [{"step_id": "1", "description": "d", "tool": "echo"}]}
    supervisor, _, actions = make([added, faithful])
    assert supervisor.repair_plan(original, record=actions.append) == faithful
    assert "calculator" in actions[0].error["message"]  # type: ignore[index]


def test_repair_plan_may_drop_a_tool() -> None:
    original = {"goal": "g", "steps": [{"step_id": "1", "tool": "echo"}]}
    dropped = {"goal": "g", "steps": [{"step_id": "1", "description": "think", "agent": "llm"}]}
    supervisor, _, actions = make([dropped])
    assert supervisor.repair_plan(original, record=actions.append) == dropped


def test_missing_tool_step_maps_a_close_name_without_the_model() -> None:
    supervisor, scripted, actions = make([])
    step = {"step_id": "1", "description": "add", "tool": "calc", "errors": ["Tool 'calc' not found"]}
    repaired = supervisor.repair_missing_tool_step(
        step, supervisor.tools.export_tools_for_llm(), "add", record=actions.append
    )
    assert repaired["tool"] == "calculator" and repaired["errors"] == [] and repaired["step_id"] == "1"
    assert scripted.prompts == []


def test_missing_tool_step_only_accepts_registered_tools() -> None:
    """FR-066: whatever the model says, only a tool in available_tools is accepted."""
    supervisor, scripted, actions = make(['{"tool": "shell"}', '{"tool": "rm -rf"}'])
    step = {"step_id": "1", "description": "delete files", "errors": ["no tool"]}
    with pytest.raises(SupervisorError):
        supervisor.repair_missing_tool_step(
            step, supervisor.tools.export_tools_for_llm(), "clean up", record=actions.append
        )
    assert "clean up" in scripted.prompts[0]["prompt"] and "no tool" in scripted.prompts[0]["prompt"]
    assert all(a.error is not None for a in actions)


def test_missing_tool_step_checks_the_chosen_tools_arguments() -> None:
    supervisor, _, actions = make(
        [
            json.dumps({"tool": "calculator", "arguments": {"x": 1}}),
            json.dumps({"tool": "calculator", "arguments": {"expression": "1+2"}}),
        ]
    )
    step = {"step_id": "7", "description": "add one and two"}
    repaired = supervisor.repair_missing_tool_step(
        step, supervisor.tools.export_tools_for_llm(), "g", record=actions.append
    )
    assert repaired["arguments"] == {"expression": "1+2"} and repaired["step_id"] == "7"
    assert [a.error is None for a in actions] == [False, True]


def test_normalize_plan_leaves_unrecognisable_input_alone() -> None:
    assert normalize_plan([1, 2]) == [1, 2]
    assert normalize_plan({"goal": "g"}) == {"goal": "g"}


# --- FR-032 in the decoding: what a repair's model call may write ---------------------------------------------

PLAN_SCHEMA = plan_schema(ToolRegistry([EchoTool(), CalculatorTool()]).export_tools_for_llm())


def _steps(schema: dict[str, Any]) -> dict[str, Any]:
    steps: dict[str, Any] = schema["properties"]["steps"]
    return steps


def _tools_offered(schema: dict[str, Any]) -> list[Any]:
    return [branch["properties"].get("tool") for branch in _steps(schema)["items"]["anyOf"]]


def test_a_repair_may_write_only_the_tools_the_original_named_and_no_more_steps_than_it_began() -> None:
    cut = '{"goal": "Add 5 and 10", "steps": [{"step_id": "1", "description": "Add", "tool": "calculator", "argu'
    schema = confined(PLAN_SCHEMA, cut, RepairScope())
    assert _tools_offered(schema) == [{"const": "calculator"}, None]  # echo is gone, thinking stays
    assert _steps(schema)["maxItems"] == 1
    assert schema["properties"]["goal"] == PLAN_SCHEMA["properties"]["goal"]
    assert _tools_offered(PLAN_SCHEMA) == [{"const": "echo"}, {"const": "calculator"}, None]  # not changed


def test_a_plan_cut_before_its_tool_may_be_repaired_into_thinking_steps_only() -> None:
    schema = confined(
        PLAN_SCHEMA, '{"goal": "What is 12 times 7?", "steps": [{"step_id": "1", "tool', RepairScope()
    )
    assert _tools_offered(schema) == [None]
    assert _steps(schema)["items"]["anyOf"][0]["required"] == ["step_id", "description", "agent"]


def test_the_tools_a_repair_is_about_stay_offered() -> None:
    schema = confined(PLAN_SCHEMA, '{"goal": "x", "steps": []}', RepairScope(tools=frozenset({"echo"})))
    assert _tools_offered(schema) == [{"const": "echo"}, None]
    assert _steps(schema)["maxItems"] == 1  # a plan has at least one step


@pytest.mark.parametrize(
    ("original", "begun"),
    [
        ({"goal": "g", "steps": [{"step_id": "1"}, {"step_id": "2"}, {"step_id": "3"}]}, 3),
        ('[{"description": "a"}, {"description": "b"}]', 2),
        ('goal: g\nsteps:\n  - step_id: "1"\n    tool: calculator\n  - step_id: "2"\n    agent: llm\n', 2),
        ('{"goal": "Add 5', 1),
    ],
)
def test_the_steps_a_repair_may_write_are_the_ones_the_original_began(original: Any, begun: int) -> None:
    assert _steps(confined(PLAN_SCHEMA, original, RepairScope()))["maxItems"] == begun


def test_a_free_tool_field_becomes_the_tools_named_or_goes_with_its_arguments() -> None:
    named = confined(
        GENERIC_PLAN_SCHEMA, {"steps": [{"tool": "calculator", "arguments": "5+"}]}, RepairScope()
    )
    item = _steps(named)["items"]
    assert item["properties"]["tool"] == {"enum": ["calculator"]}
    unnamed = confined(GENERIC_PLAN_SCHEMA, {"goal": "g", "steps": [{"description": "d"}]}, RepairScope())
    item = _steps(unnamed)["items"]
    assert "tool" not in item["properties"] and "arguments" not in item["properties"]
    assert item["required"] == ["step_id", "description", "agent"]


def test_schemas_without_steps_are_held_to_nothing() -> None:
    assert confined(CALC_SCHEMA, '{"expression": "5 +', RepairScope()) is CALC_SCHEMA
    assert confined(None, "{", RepairScope()) is None


def test_a_plan_repair_asks_the_model_with_the_confined_schema() -> None:
    """Gemma 3 270M, asked to repair a plan without a description, wrote thinking steps until max_tokens cut
    them; held to the one step the plan began, it wrote that step."""
    scripted = ScriptedLLM(
        [
            {
                "goal": "Name the author of Hamlet",
                "steps": [{"step_id": "1", "description": "Name him", "agent": "llm"}],
            }
        ]
    )
    scripted.supports_json_schema = True  # as llama.cpp: the schema reaches the model
    supervisor = DefaultSupervisor(ModelClient(scripted), SchemaValidator())
    broken = {"goal": "Name the author of Hamlet", "steps": [{"step_id": "1", "agent": "llm"}]}
    repaired = supervisor.repair_plan(broken)
    assert repaired["steps"][0]["description"] == "Name him"
    asked = scripted.prompts[0]["json_schema"]
    assert _steps(asked)["maxItems"] == 1
    assert "tool" not in _steps(asked)["items"]["properties"]
