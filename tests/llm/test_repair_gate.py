"""FR-032's one gate (issue 26 item 4): a repair may fix what is malformed, never add a tool or change what the
model said. On its own, then through each path that repairs: parse_json, the plan parser, the supervisor's
tool-call repair, and a supervisor plugin whose repair oversteps."""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import Plan, SupervisorError, ToolRegistry
from aeon_kernel.kit import ModelClient, RepairScope, admit_repair, parse_json
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.planning import parse_plan
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor

TOOLS = ToolRegistry([EchoTool(), CalculatorTool()])
CALC_SCHEMA = CalculatorTool().input_schema


def test_a_tool_merely_mentioned_in_text_is_not_one_the_text_names() -> None:
    """Checked by substring, "I would use the calculator" let a repair add a calculator step."""
    repaired = {"steps": [{"step_id": "1", "tool": "calculator", "arguments": {"expression": "1 + 1"}}]}
    with pytest.raises(SupervisorError, match="names tools the original output did not: \\['calculator'\\]"):
        admit_repair("I would use the calculator for this", repaired)
    admit_repair(
        '{"steps": [{"tool": "calculator", "arguments": {"expression": "1 +', repaired
    )  # cut off: named


def test_a_valid_argument_may_not_be_changed_and_an_invalid_one_may() -> None:
    """A repair that turned an argument 15 into "2 + 2" was accepted."""
    original = {"tool_name": "add", "arguments": {"a": 15, "b": "seven"}}
    with pytest.raises(SupervisorError, match="changed a from 15 to '2 \\+ 2'"):
        admit_repair(
            original,
            {"tool_name": "add", "arguments": {"a": "2 + 2", "b": 7}},
            RepairScope(arguments=frozenset({"b"})),
        )
    admit_repair(
        original,
        {"tool_name": "add", "arguments": {"a": 15, "b": 7}},
        RepairScope(arguments=frozenset({"b"})),
    )
    admit_repair(
        original, {"tool_name": "add", "arguments": {"b": 7}}, RepairScope(arguments=frozenset({"b"}))
    )  # dropped


def test_a_plan_repair_keeps_the_arguments_of_the_steps_it_was_not_about() -> None:
    original = {
        "goal": "g",
        "steps": [
            {"step_id": "1", "tool": "calculator", "arguments": {"expression": "15 + 4"}},
            {"step_id": "2", "tool": "calculator", "arguments": {"expression": 7}},  # not a string: invalid
        ],
    }
    changed_valid = {
        "goal": "g",
        "steps": [
            {"step_id": "1", "description": "d", "tool": "calculator", "arguments": {"expression": "2 + 2"}},
            {"step_id": "2", "description": "d", "tool": "calculator", "arguments": {"expression": "7"}},
        ],
    }
    from aeon_plugins.planning import plan_repair_scope

    scope = plan_repair_scope(original, TOOLS)
    assert scope.arguments == frozenset({"2"})
    with pytest.raises(SupervisorError, match="changed 1 from"):
        admit_repair(original, changed_valid, scope)
    fixed = {
        **changed_valid,
        "steps": [
            {**changed_valid["steps"][0], "arguments": {"expression": "15 + 4"}},
            changed_valid["steps"][1],
        ],
    }
    admit_repair(original, fixed, scope)


class Overstepping(DefaultSupervisor):
    """A supervisor plugin whose JSON repair adds a tool and changes a value the model gave validly."""

    def repair_json(
        self, malformed_json: Any, expected_schema: Any = None, max_attempts: int = 2, *, record: Any = None
    ) -> Any:
        return {"answer": "42", "tool": "calculator"}


def _supervisor(
    cls: type[DefaultSupervisor] = DefaultSupervisor, responses: list[Any] | None = None
) -> DefaultSupervisor:
    llm = ModelClient(ScriptedLLM(responses or []))
    return cls(llm, SchemaValidator(), TOOLS)


def test_every_supervisors_repair_passes_the_gate_in_parse_json() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    with pytest.raises(SupervisorError, match="names tools the original output did not"):
        parse_json(
            "the answer is 42, says the calculator", _supervisor(Overstepping), lambda action: None, schema
        )
    with pytest.raises(SupervisorError, match="names tools"):  # valid JSON failing its schema, same gate
        parse_json(
            '{"answer": 42}', _supervisor(Overstepping), lambda action: None, schema, SchemaValidator()
        )


def test_the_tool_call_repair_may_not_change_a_valid_argument() -> None:
    """The model's repair rewrote a valid argument as well as the invalid one: refused, and the next attempt
    (which fixes only what was wrong) is taken."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    overstepping = '{"a": 4, "b": 7}'
    right = '{"a": 15, "b": 7}'
    supervisor = _supervisor(responses=[overstepping, right])
    repaired = supervisor.repair_tool_call({"tool_name": "add", "arguments": {"a": 15, "b": "seven"}}, schema)
    assert repaired == {"tool_name": "add", "arguments": {"a": 15, "b": 7}}


def test_the_plan_parser_refuses_a_repair_that_adds_a_tool_the_text_only_mentions() -> None:
    class AddsTool(DefaultSupervisor):
        def repair_plan(
            self, malformed_plan: Any, max_attempts: int = 2, *, record: Any = None
        ) -> dict[str, Any]:
            return {
                "goal": "g",
                "steps": [
                    {
                        "step_id": "1",
                        "description": "d",
                        "tool": "calculator",
                        "arguments": {"expression": "1 + 1"},
                    }
                ],
            }

    text = '{"goal": "use the calculator", "steps": "none"}'
    with pytest.raises(SupervisorError, match="calculator"):
        parse_plan(text, TOOLS, _supervisor(AddsTool), SchemaValidator())
    assert isinstance(Plan, type)
