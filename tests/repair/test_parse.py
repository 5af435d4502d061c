"""parse_plan: what it returns, what it records, when it asks the supervisor's model, and the planner using it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aeon_kernel import Supervisor, SupervisorAction, SupervisorError, ValidationError
from aeon_kernel.kit import Check, ModelClient
from aeon_plugins.planning import ModelPlanner, PlanParse, parse_plan, repair_json_text
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor
from tests.repair.corpus import corpus_tools

TOOLS = corpus_tools()
VALIDATOR = SchemaValidator()
PLAN = {
    "goal": "Add 5 and 10",
    "steps": [
        {"step_id": "1", "description": "Add", "tool": "calculator", "arguments": {"expression": "5 + 10"}},
        {"step_id": "2", "description": "Report", "agent": "llm"},
    ],
}
TEXT = json.dumps(PLAN)


def supervised(responses: list[Any]) -> tuple[DefaultSupervisor, ScriptedLLM]:
    model = ScriptedLLM(responses)
    return DefaultSupervisor(ModelClient(model), VALIDATOR, TOOLS), model


class RefusingSupervisor(Supervisor):
    """Fails the test if deterministic_only ever reaches the supervisor."""

    def repair_json(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the supervisor was asked")

    repair_tool_call = repair_plan = repair_missing_tool_step = repair_json


def test_a_valid_plan_comes_back_as_written_with_no_actions() -> None:
    parsed = parse_plan(TEXT, TOOLS, None, VALIDATOR)
    assert parsed == PlanParse(parsed.plan, ())
    assert parsed.plan.model_dump(mode="json", exclude_defaults=True) == PLAN


def test_each_deterministic_repair_is_returned_and_recorded() -> None:
    recorded: list[SupervisorAction] = []
    text = "```json\n" + TEXT.replace('"tool"', '"tool_name"') + "\n```"
    parsed = parse_plan(
        text, TOOLS, RefusingSupervisor(), VALIDATOR, deterministic_only=True, record=recorded.append
    )
    assert parsed.plan.steps[0].tool == "calculator"
    assert [(a.action_type, a.method, a.attempt_number) for a in parsed.actions] == [
        ("json_repair", "deterministic", 1),
        ("plan_repair", "deterministic", 1),
    ]
    assert tuple(recorded) == parsed.actions
    assert parsed.actions[0].original_output == {"text": text}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (TEXT[: TEXT.index("}},") + 3], "cut off inside a list"),
        ("I would add the numbers.", "no JSON could be recovered"),
        (json.dumps({"steps": PLAN["steps"]}), "goal"),
        (TEXT.replace('"5 + 10"', "NaN"), "NaN is not a number JSON can hold"),
    ],
)
def test_deterministic_only_refuses_with_what_went_wrong_and_what_to_do(text: str, says: str) -> None:
    recorded: list[SupervisorAction] = []
    with pytest.raises(SupervisorError) as info:
        parse_plan(text, TOOLS, None, VALIDATOR, deterministic_only=True, record=recorded.append)
    assert says in str(info.value) and "model" in str(info.value)
    assert [a.error is not None for a in recorded] == [True]


def test_text_that_is_not_text_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match="got bytes"):
        parse_plan(TEXT.encode(), TOOLS, None, VALIDATOR)  # type: ignore[arg-type]


def test_a_plan_cut_inside_its_steps_goes_to_the_supervisors_model() -> None:
    supervisor, model = supervised([TEXT])
    parsed = parse_plan(TEXT[:100], TOOLS, supervisor, VALIDATOR)
    assert parsed.plan.model_dump(mode="json", exclude_defaults=True) == PLAN
    assert len(model.prompts) == 1 and "cut off inside a string" in model.prompts[0]["prompt"]
    assert [(a.action_type, a.method) for a in parsed.actions] == [("json_repair", "llm")]


def test_a_model_repair_that_adds_a_tool_is_refused() -> None:
    """FR-032: the model's repair of a plan that named only the calculator may not bring in echo."""
    added = {**PLAN, "steps": [*PLAN["steps"], {"step_id": "3", "description": "Say", "tool": "echo"}]}
    supervisor, _ = supervised([json.dumps(added), json.dumps(added)])
    with pytest.raises(SupervisorError, match="echo"):
        parse_plan(TEXT[:100], TOOLS, supervisor, VALIDATOR)


def test_the_model_planner_reads_its_plan_through_parse_plan() -> None:
    written = {**PLAN, "steps": [{**PLAN["steps"][0], "function": "calculator"}, PLAN["steps"][1]]}
    del written["steps"][0]["tool"]
    model = ScriptedLLM([json.dumps(written)])
    client = ModelClient(model)
    planner = ModelPlanner(client, VALIDATOR, DefaultSupervisor(client, VALIDATOR, TOOLS))
    recorded: list[SupervisorAction | Check] = []
    plan = planner.generate_plan("add 5 and 10", None, TOOLS, record=recorded.append)
    assert plan.steps[0].tool == "calculator"  # not a step that lost its tool to an unknown key
    actions = [a for a in recorded if isinstance(a, SupervisorAction)]
    assert [(a.action_type, a.method) for a in actions] == [("plan_repair", "deterministic")]
    # the repaired plan fits the request: the planner's check passes it
    checks = [(c.name, c.verdict) for c in recorded if isinstance(c, Check)]
    assert checks == [("plan_fits_request", "passed")] and len(actions) + len(checks) == len(recorded)
    assert len(model.prompts) == 1  # the plan itself; no repair needed the model


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{'a': True, 'b': None,}", {"a": True, "b": None}),
        ('{"a": "x", // note\n "b": [1, 2,],}', {"a": "x", "b": [1, 2]}),
        ('{"a": "\\ud83d\\ude00",}', {"a": "\U0001f600"}),
        ('{"a": {"b": "c"}', {"a": {"b": "c"}}),
        ("```yaml\na: no\nb: 1:20\n```", {"a": "no", "b": "1:20"}),
    ],
)
def test_repair_json_text_reads_lenient_json_exactly(text: str, value: Any) -> None:
    assert repair_json_text(text) == value


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "cut',
        '{"a": [1, 2',
        '{"a": 12',
        '{"a":',
        "{'a': 'it's'}",
        '{"a": Infinity}',
        "```yaml\na: &x 1\nb: *x\n```",
    ],
)
def test_repair_json_text_refuses_to_guess(text: str) -> None:
    with pytest.raises(ValidationError):
        repair_json_text(text)
