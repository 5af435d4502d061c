"""The default supervisor (FR-028…033, FR-050/051, FR-066): deterministic first, two attempts, nothing new."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aeon_kernel import SupervisorAction, SupervisorError, ToolRegistry
from aeon_kernel.llm.client import ModelClient
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.planning import normalize_plan
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import REPAIR_SYSTEM_PROMPT, DefaultSupervisor

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
