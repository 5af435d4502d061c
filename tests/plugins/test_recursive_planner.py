"""The ``recursive`` planner: plans like the kernel's model planner, refines with filtered deltas, decomposes steps.

The real model's behaviour is replayed from a cassette recorded from Gemma 3 270M;
``AEON_RECORD_CASSETTES=1 python3 -m pytest -m model tests/plugins/test_recursive_planner.py`` re-records it.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aeon_kernel import (
    AeonError,
    LLMAdapter,
    LLMError,
    Plan,
    PlanStep,
    RecursivePlanner,
    RefinementAction,
    StepStatus,
    SupervisorAction,
    SupervisorError,
    TaskProfile,
    ToolRegistry,
    ValidationError,
    ValidationIssue,
)
from aeon_kernel.config import AeonConfig
from aeon_kernel.engine import Engine
from aeon_kernel.errors import NestingDepthError
from aeon_kernel.kit import ModelClient
from aeon_kernel.llm.cassette import RecordingAdapter, ReplayAdapter
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.multipass.deltas import RefinementLedger, apply_refinements
from aeon_plugins.recursive_planner import (
    EXAMPLE_REFINED_STEP,
    ModelRecursivePlanner,
    aeon_register_planners,
)
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor
from tests.support.watch import Watch

CASSETTE = Path(__file__).resolve().parents[1] / "cassettes" / "reasoning" / "recursive_planner.jsonl"
TOOLS = ToolRegistry([EchoTool(), CalculatorTool()])

PLAN = {
    "goal": "Add 2 and 3, then multiply by 4",
    "steps": [
        {
            "step_id": "1",
            "description": "Add 2 and 3",
            "tool": "calculator",
            "arguments": {"expression": "2 + 3"},
        },
        {
            "step_id": "2",
            "description": "Multiply by 4",
            "tool": "calculator",
            "arguments": {"expression": "5 * 4"},
        },
        {"step_id": "3", "description": "Report the product", "agent": "llm"},
    ],
}
#: a request PLAN does: every number it uses is stated (a planned call's 5 is not read as step 1's result), in order
REQUEST = "add 2 and 3, then multiply 5 by 4"


class Permissive(SchemaValidator):
    """A validator that lets any model output through: what the planner does with it must still be safe."""

    def validate_llm_output(self, output: Any, expected_schema: dict[str, Any] | None = None) -> bool:
        return True


def make(
    responses: list[Any], *, constrained: bool = False, validator: SchemaValidator | None = None
) -> tuple[ModelRecursivePlanner, ScriptedLLM]:
    scripted = ScriptedLLM(responses)
    scripted.supports_json_schema = constrained
    llm = ModelClient(scripted, sleep=lambda _: None)
    checker = validator or SchemaValidator()
    return ModelRecursivePlanner(llm, checker, DefaultSupervisor(llm, checker, TOOLS)), scripted


def profile(depth: int) -> TaskProfile:
    return TaskProfile.default().model_copy(update={"reasoning_depth": depth})


def current_plan(*statuses: str) -> Plan:
    """Steps 1..n with the given statuses; step n reports with the model, the others compute."""
    steps = []
    for n, status in enumerate(statuses, start=1):
        tool = {"agent": "llm"} if n == len(statuses) else {"tool": "calculator"}
        steps.append(PlanStep(step_id=str(n), description=f"step {n}", status=StepStatus(status), **tool))
    return Plan(goal="Add 5 and 10", steps=tuple(steps))


def vague(location: str = "3", type_: str = "specificity") -> ValidationIssue:
    return ValidationIssue(
        issue_id=f"i-{location}", type=type_, severity="MEDIUM", description="too vague", location=location
    )


def action(
    kind: str = "MODIFY", target: str = "3", description: str = "Report 5 + 10", uses: str = "llm"
) -> dict[str, Any]:
    return {
        "action_type": kind,
        "target": target,
        "reason": "be specific",
        "step": {"description": description, "uses": uses},
    }


# --- generate_plan ------------------------------------------------------------------------------------------------


def test_generate_plan_numbers_and_links_the_steps() -> None:
    planner, scripted = make([PLAN], constrained=True)
    plan = planner.generate_plan(REQUEST, None, TOOLS)
    assert [s.step_id for s in plan.steps] == ["1", "2", "3"]
    assert [(s.step_index, s.total_steps) for s in plan.steps] == [(1, 3), (2, 3), (3, 3)]
    assert [s.dependencies for s in plan.steps] == [(), ("1",), ("1", "2")]
    assert [s.incoming_context for s in plan.steps] == [
        "the request",
        "the request and the results of steps 1",
        "the request and the results of steps 1, 2",
    ]
    assert [s.handoff_to_next for s in plan.steps] == [
        "hands its result to step 2",
        "hands its result to step 3",
        "its result is the answer",
    ]
    assert plan.steps[0].arguments == {"expression": "2 + 3"} and plan.steps[2].agent == "llm"
    (call,) = scripted.prompts
    assert call["prompt"].endswith(f"Request: {REQUEST}\nPlan:")
    assert "- calculator:" in call["prompt"] and "- echo:" in call["prompt"]
    schema = call["json_schema"]
    assert schema["properties"]["steps"]["maxItems"] == 10
    tools = [
        v["properties"].get("tool", {}).get("const") for v in schema["properties"]["steps"]["items"]["anyOf"]
    ]
    assert tools == ["echo", "calculator", None]


@pytest.mark.parametrize(("depth", "cap"), [(1, 4), (2, 6), (3, 8), (4, 10), (5, 10)])
def test_the_profile_bounds_the_number_of_steps(depth: int, cap: int) -> None:
    planner, scripted = make([PLAN], constrained=True)
    planner.generate_plan(REQUEST, profile(depth), TOOLS)
    assert scripted.prompts[0]["json_schema"]["properties"]["steps"]["maxItems"] == cap


def test_a_plan_with_duplicate_ids_is_repaired_by_the_supervisor() -> None:
    duplicated = {**PLAN, "steps": [{**s, "step_id": "1"} for s in PLAN["steps"]]}
    planner, scripted = make([duplicated])
    actions: list[Any] = []
    plan = planner.generate_plan(REQUEST, None, TOOLS, record=actions.append)
    assert len({s.step_id for s in plan.steps}) == 3
    assert [s.step_index for s in plan.steps] == [1, 2, 3]
    assert [a.action_type for a in actions if isinstance(a, SupervisorAction)] == ["plan_repair"]
    assert len(scripted.prompts) == 1  # the deterministic repair sufficed


def test_the_plan_is_the_kernel_planners_numbered_and_linked() -> None:
    """The kernel's ``model`` planner writes the plan (an unknown tool is left, as there, to the step executor's
    missing-tool repair and the semantic validator); the recursive planner numbers and links its steps."""
    invented = {
        "goal": "g",
        "steps": [
            {"step_id": "1", "description": "search", "tool": "web", "arguments": {}},
            {"step_id": "2", "description": "report", "agent": "llm"},
        ],
    }
    planner, _ = make([invented])
    plan = planner.generate_plan("x", None, TOOLS)
    assert [(s.step_id, s.tool, s.step_index, s.total_steps) for s in plan.steps] == [
        ("1", "web", 1, 2),
        ("2", None, 2, 2),
    ]
    assert (
        plan.steps[1].dependencies == ("1",) and plan.steps[0].handoff_to_next == "hands its result to step 2"
    )


@pytest.mark.parametrize(
    ("responses", "error"),
    [
        pytest.param(["garbage", "garbage", "garbage"], SupervisorError, id="garbage"),
        pytest.param([{"goal": 3, "steps": "none"}, "{}", "{}"], SupervisorError, id="wrong-types"),
        pytest.param(["", "", ""], SupervisorError, id="empty"),
        pytest.param([], LLMError, id="model-unavailable"),
    ],
)
def test_generate_plan_fails_with_a_structured_error(responses: list[Any], error: type[AeonError]) -> None:
    planner, _ = make(responses)
    with pytest.raises(error):
        planner.generate_plan("x", None, TOOLS)


def test_an_empty_request_is_invalid_input() -> None:
    planner, scripted = make([PLAN])
    with pytest.raises(ValidationError):
        planner.generate_plan("  ", None, TOOLS)
    assert scripted.prompts == []


# --- refine_plan --------------------------------------------------------------------------------------------------


def test_nothing_to_fix_means_no_actions_and_no_model_call() -> None:
    planner, scripted = make([{"actions": [action()]}])
    assert planner.refine_plan(current_plan("complete", "pending", "pending"), [], [], [], {"1"}) == []
    assert scripted.prompts == []


def test_refine_plan_modifies_a_pending_step_and_keeps_its_id() -> None:
    planner, scripted = make([{"actions": [action()]}], constrained=True)
    plan = current_plan("complete", "complete", "pending")
    issues = [vague("3"), vague("1", "consistency")]
    (result,) = planner.refine_plan(plan, issues, ["coherence_below_threshold"], [], {"1", "2"})
    assert (result.action_type, result.target_step_id, result.reason) == ("MODIFY", "3", "be specific")
    assert result.new_step is not None
    assert (result.new_step.step_id, result.new_step.description, result.new_step.agent) == (
        "3",
        "Report 5 + 10",
        "llm",
    )
    assert result.semantic_validation_input == (issues[0],)
    assert result.inconsistency_detected is False
    call = scripted.prompts[0]
    assert (
        "1 [complete] step 1 (calculator)\n2 [complete] step 2 (calculator)\n3 [pending] step 3 (llm)"
        in call["prompt"]
    )
    assert (
        "3: specificity: too vague\n1: consistency: too vague\nplan: coherence_below_threshold"
        in call["prompt"]
    )
    props = call["json_schema"]["properties"]["actions"]
    assert props["maxItems"] == 3
    assert props["items"]["properties"]["target"]["enum"] == ["3", "end"]
    assert props["items"]["properties"]["action_type"]["enum"] == ["ADD", "MODIFY", "REMOVE", "REPLACE"]
    assert props["items"]["properties"]["step"]["properties"]["uses"]["enum"] == ["calculator", "llm"]


def test_add_and_replace_get_fresh_ids_and_end_is_a_section() -> None:
    answer = {
        "actions": [
            action("ADD", "2", "Check the sum"),
            action("REPLACE", "3", "Say the sum"),
            action("ADD", "end", "Echo it", "calculator"),
        ]
    }
    planner, _ = make([answer])
    plan = current_plan("complete", "pending", "pending")
    added, replaced, at_end = planner.refine_plan(plan, [vague("2")], [], [], {"1"})
    ids = {s.step_id for s in plan.steps}
    assert added.target_step_id == "2" and added.new_step is not None and added.new_step.step_id not in ids
    assert replaced.new_step is not None and replaced.new_step.step_id not in ids | {added.new_step.step_id}
    assert (at_end.target_step_id, at_end.target_plan_section) == (None, "end")
    assert at_end.new_step is not None and at_end.new_step.tool == "calculator"
    # the kernel applies them cleanly
    steps, outcomes = apply_refinements(list(plan.steps), [added, replaced, at_end], RefinementLedger())
    assert all(o.applied for o in outcomes), [o.reason for o in outcomes]
    assert [s.step_id for s in steps] == [
        "1",
        "2",
        added.new_step.step_id,
        replaced.new_step.step_id,
        at_end.new_step.step_id,
    ]


def test_the_same_answer_gives_the_same_ids() -> None:
    answer = {"actions": [action("ADD", "2", "Check the sum")]}
    first, _ = make([answer])
    second, _ = make([answer])
    plan = current_plan("complete", "pending", "pending")
    a = first.refine_plan(plan, [vague("2")], [], [], {"1"})
    b = second.refine_plan(plan, [vague("2")], [], [], {"1"})
    assert a == b


def test_when_every_step_has_run_the_schema_offers_only_an_add_at_the_end() -> None:
    """The pass left something undone (a semantic issue) after its last step: the only delta the kernel could apply
    is an ADD at the end, so a constrained model is offered nothing else."""
    answer = {"actions": [action("ADD", "end", "Multiply the result by 5", "calculator")]}
    planner, scripted = make([answer], constrained=True)
    plan = current_plan("complete", "complete")
    issue = vague("request", "consistency")
    (added,) = planner.refine_plan(plan, [issue], ["semantic_issues"], [], {"1", "2"}, tool_registry=TOOLS)
    item = scripted.prompts[0]["json_schema"]["properties"]["actions"]["items"]["properties"]
    assert item["action_type"]["enum"] == ["ADD"] and item["target"]["enum"] == ["end"]
    assert "request: consistency: too vague" in scripted.prompts[0]["prompt"]
    assert added.target_plan_section == "end" and added.new_step is not None
    assert added.new_step.tool == "calculator"


def test_a_blocked_step_is_refined_and_flagged_inconsistent() -> None:
    """The prompt says what blocked the step (its ``failure``), so that the model can change what failed."""
    planner, scripted = make([{"actions": [action("REPLACE", "2", "Ask for the missing number")]}])
    plan = current_plan("complete", "invalid", "pending")
    blocked = plan.steps[1].model_copy(update={"failure": "calculator failed: division by zero"})
    plan = plan.model_copy(update={"steps": (plan.steps[0], blocked, plan.steps[2])})
    (result,) = planner.refine_plan(plan, [], [], ["2"], {"1"})
    assert result.action_type == "REPLACE" and result.inconsistency_detected is True
    assert "2: the step is blocked: calculator failed: division by zero" in scripted.prompts[0]["prompt"]


def test_the_registry_widens_the_tools_a_new_step_may_use() -> None:
    planner, scripted = make([{"actions": [action("ADD", "end", "Echo it", "echo")]}], constrained=True)
    (result,) = planner.refine_plan(
        current_plan("complete", "pending"), [vague("2")], [], [], {"1"}, tool_registry=TOOLS
    )
    assert result.new_step is not None and result.new_step.tool == "echo"
    uses = scripted.prompts[0]["json_schema"]["properties"]["actions"]["items"]["properties"]["step"][
        "properties"
    ]["uses"]
    assert uses["enum"] == ["echo", "calculator", "llm"]


@pytest.mark.parametrize(
    "proposal",
    [
        pytest.param(action("MODIFY", "1"), id="an-executed-step"),
        pytest.param(action("REMOVE", "2"), id="a-step-in-executed_step_ids"),
        pytest.param(action("MODIFY", "9"), id="an-unknown-step"),
        pytest.param(action("MODIFY", "end"), id="modify-the-end"),
        pytest.param(action("ADD", "3", "Search the web", "web_search"), id="an-unknown-tool"),
        pytest.param(action("ADD", "3", ""), id="no-description"),
        pytest.param(action("ADD", "3", EXAMPLE_REFINED_STEP), id="a-copy-of-the-example"),
        pytest.param(action("MERGE", "3"), id="an-unknown-action"),
        pytest.param({"target": "3"}, id="no-action-type"),
        pytest.param("MODIFY 3", id="not-an-object"),
    ],
)
def test_unsafe_proposals_are_dropped_even_when_the_validator_lets_them_through(proposal: Any) -> None:
    planner, _ = make([{"actions": [proposal, action("REMOVE", "4")]}], validator=Permissive())
    plan = current_plan("complete", "pending", "pending", "pending")  # step 2 is pending but already executed
    result = planner.refine_plan(plan, [vague("3")], [], [], {"1", "2"})
    assert [(a.action_type, a.target_step_id) for a in result] == [("REMOVE", "4")]


def test_one_action_per_step() -> None:
    planner, _ = make(
        [{"actions": [action("MODIFY", "3"), action("REMOVE", "3"), action("ADD", "3", "more")]}]
    )
    result = planner.refine_plan(current_plan("complete", "pending", "pending"), [vague()], [], [], {"1"})
    assert [a.action_type for a in result] == ["MODIFY"]


@pytest.mark.parametrize(
    "responses",
    [
        pytest.param(["garbage", "garbage", "garbage"], id="garbage"),
        pytest.param([{"actions": "all of them"}, "{}", "{}"], id="wrong-type"),
        pytest.param([{"actions": [action("MODIFY", "1")]}, "{}", "{}"], id="a-target-outside-the-enum"),
        pytest.param([{"actions": [action()] * 4}, "{}", "{}"], id="too-many"),
        pytest.param(["", "", ""], id="empty"),
        pytest.param([], id="model-unavailable"),
    ],
)
def test_refine_plan_gives_nothing_when_the_model_gives_nothing_usable(responses: list[Any]) -> None:
    planner, _ = make(responses)
    assert planner.refine_plan(current_plan("complete", "pending", "pending"), [vague()], [], [], {"1"}) == []


def test_refine_plan_refuses_invalid_inputs() -> None:
    planner, _ = make([])
    with pytest.raises(ValidationError):
        planner.refine_plan({"goal": "g"}, [vague()], [], [], set())  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        planner.refine_plan(current_plan("pending"), [vague()], [], [], "1")  # type: ignore[arg-type]


PROPOSAL = st.fixed_dictionaries(
    {
        "action_type": st.sampled_from(["ADD", "MODIFY", "REMOVE", "REPLACE", "SPLIT"]),
        "target": st.sampled_from(["1", "2", "3", "4", "5", "end", "x"]),
        "reason": st.text(max_size=5),
        "step": st.fixed_dictionaries(
            {
                "description": st.text(max_size=8),
                "uses": st.sampled_from(["llm", "calculator", "echo", "web"]),
            }
        ),
    }
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["complete", "failed"]), max_size=3),
    st.sampled_from([[], ["running"], ["invalid"]]),
    st.integers(0, 3),
    st.lists(PROPOSAL, max_size=5),
)
def test_refinements_never_target_executed_steps(
    finished: list[str], current: list[str], pending: int, proposals: list[dict[str, Any]]
) -> None:
    statuses = [*finished, *current, *["pending"] * pending]
    if not statuses:
        statuses = ["pending"]
    plan = current_plan(*statuses)
    executed = {s.step_id for s in plan.steps if s.status.is_terminal}
    planner, _ = make([{"actions": proposals}], validator=Permissive())
    result = planner.refine_plan(plan, [vague()], ["steps_unfinished"], [], executed)
    refinable = {s.step_id for s in plan.steps if s.status in (StepStatus.PENDING, StepStatus.INVALID)}
    for a in result:
        assert isinstance(a, RefinementAction)
        assert a.target_step_id is None or (
            a.target_step_id in refinable and a.target_step_id not in executed
        )
    targets = [a.target_step_id for a in result if a.target_step_id is not None]
    assert len(targets) == len(set(targets))
    # whatever comes back, the kernel can apply without touching a finished step
    steps, _ = apply_refinements(list(plan.steps), result, RefinementLedger())
    assert [s for s in steps if s.status.is_terminal] == [s for s in plan.steps if s.status.is_terminal]


# --- create_subplan -----------------------------------------------------------------------------------------------

#: what the model writes for a step: a plan, as the kernel's planner asks for one
SUBPLAN = {
    "goal": "Compare the populations",
    "steps": [
        {"step_id": "1", "description": "Look up both populations", "agent": "llm"},
        {"step_id": "2", "description": "Compare them", "agent": "llm"},
    ],
}


def test_create_subplan_nests_ids_under_the_parent() -> None:
    planner, scripted = make([SUBPLAN], constrained=True)
    plan = planner.create_subplan("3", "compare the populations of France and Spain", 1)
    assert plan.goal == "compare the populations of France and Spain"
    assert [s.step_id for s in plan.steps] == ["3.1", "3.2"]
    assert [(s.step_index, s.total_steps) for s in plan.steps] == [(1, 2), (2, 2)]
    assert (
        plan.steps[1].dependencies == ("3.1",)
        and plan.steps[0].handoff_to_next == "hands its result to step 3.2"
    )
    assert all(s.agent == "llm" for s in plan.steps)
    # the kernel planner's prompt and schema: no tools without a registry, at most 4 steps
    schema = scripted.prompts[0]["json_schema"]["properties"]["steps"]
    assert schema["maxItems"] == 4 and len(schema["items"]["anyOf"]) == 1
    assert "(no tools" in scripted.prompts[0]["prompt"]
    assert scripted.prompts[0]["prompt"].endswith(
        "Request: compare the populations of France and Spain\nPlan:"
    )


def test_subplan_steps_may_use_registered_tools_with_their_arguments() -> None:
    answer = {
        "goal": "Multiply 5 by 4",
        "steps": [
            {
                "step_id": "a",
                "description": "Multiply 5 by 4",
                "tool": "calculator",
                "arguments": {"expression": "5 * 4"},
            },
            {"step_id": "b", "description": "Say it", "tool": "echo", "arguments": {"message": "20"}},
        ],
    }
    planner, scripted = make([answer])
    plan = planner.create_subplan(
        "2.1", "multiply the result by 4, where the result is 5, then say it", 2, tool_registry=TOOLS
    )
    assert [(s.step_id, s.tool, s.arguments) for s in plan.steps] == [
        ("2.1.1", "calculator", {"expression": "5 * 4"}),
        ("2.1.2", "echo", {"message": "20"}),
    ]
    assert "- calculator:" in scripted.prompts[0]["prompt"] and "- echo:" in scripted.prompts[0]["prompt"]


@pytest.mark.parametrize(
    ("parent", "depth", "limit"), [("1", 5, 5), ("1", 6, 5), ("1", 2, 2), ("1.2.3.4.5", 1, 5)]
)
def test_the_depth_limit_is_checked_before_any_model_call(parent: str, depth: int, limit: int) -> None:
    planner, scripted = make([SUBPLAN])
    with pytest.raises(NestingDepthError) as info:
        planner.create_subplan(parent, "too deep", depth, limit)
    assert info.value.max_depth == limit and info.value.depth > limit
    assert scripted.prompts == []


def test_just_under_the_limit_is_allowed() -> None:
    planner, _ = make([SUBPLAN])
    plan = planner.create_subplan("1.2.3.4", "deep but fine", 4)
    assert [s.step_id for s in plan.steps] == ["1.2.3.4.1", "1.2.3.4.2"]


@pytest.mark.parametrize(
    ("responses", "error"),
    [
        pytest.param(["garbage", "garbage", "garbage"], SupervisorError, id="garbage"),
        pytest.param([{"steps": "two"}, "{}", "{}"], SupervisorError, id="wrong-type"),
        pytest.param(["", "", ""], SupervisorError, id="empty"),
        pytest.param([], LLMError, id="model-unavailable"),
    ],
)
def test_create_subplan_fails_with_a_structured_error(responses: list[Any], error: type[AeonError]) -> None:
    planner, _ = make(responses)
    with pytest.raises(error):
        planner.create_subplan("3", "do it", 1, tool_registry=TOOLS)


@pytest.mark.parametrize(
    "args",
    [("", "d", 1), ("3", " ", 1), ("3", "d", -1), ("3", "d", "1"), ("3", "d", True)],
)
def test_create_subplan_refuses_invalid_inputs(args: tuple[Any, ...]) -> None:
    planner, scripted = make([SUBPLAN])
    with pytest.raises(ValidationError):
        planner.create_subplan(*args)
    with pytest.raises(ValidationError):
        planner.create_subplan("3", "d", 1, 0)
    assert scripted.prompts == []


# --- registration -------------------------------------------------------------------------------------------------


def test_registered_as_the_recursive_planner() -> None:
    registered: list[tuple[str, Any]] = []
    aeon_register_planners(lambda name, factory: registered.append((name, factory)))
    assert [name for name, _ in registered] == ["recursive"]
    assert issubclass(registered[0][1], RecursivePlanner)


def test_the_engine_plans_a_run_with_it() -> None:
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=[PLAN, '{"answer": "20"}'])
        .with_choice("planner", "recursive")
    )
    plugins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    with Engine(config, plugins=plugins, autoload=False) as engine:
        assert isinstance(engine.planner, ModelRecursivePlanner)
        result = engine.orchestrator(ttl=10).execute("add 2 and 3, then multiply the result by 4")
    assert result["status"] == "completed", result["message"]
    steps = result["final_state"]["plan"]["steps"]
    assert [s["step_index"] for s in steps] == [1, 2, 3] and steps[1]["result"]["value"] == 20


# --- the real model -----------------------------------------------------------------------------------------------


def planning_with(adapter: LLMAdapter) -> tuple[dict[str, Any], Watch]:
    """The three operations on the real model; each outcome is a value or the structured error it raised."""
    watch = Watch(adapter)
    llm = ModelClient(watch)
    validator = SchemaValidator()
    planner = ModelRecursivePlanner(llm, validator, DefaultSupervisor(llm, validator, TOOLS))
    out: dict[str, Any] = {}
    out["plan"] = planner.generate_plan("add 2 and 3, then multiply the result by 4", None, TOOLS)
    vague_plan = Plan(
        goal="Add 5 and 10",
        steps=(
            PlanStep(step_id="1", description="Add 5 and 10", tool="calculator", status=StepStatus.COMPLETE),
            PlanStep(step_id="2", description="Do stuff", agent="llm"),
        ),
    )
    issue = ValidationIssue(
        issue_id="i1",
        type="specificity",
        severity="MEDIUM",
        description="'Do stuff' says nothing",
        location="2",
    )
    out["refinements"] = planner.refine_plan(vague_plan, [issue], [], [], {"1"}, tool_registry=TOOLS)
    out["vague_plan"] = vague_plan
    try:
        out["subplan"] = planner.create_subplan(
            "2", "calculate 9 times 9 and then echo the result", 1, tool_registry=TOOLS
        )
    except SupervisorError as exc:
        out["subplan"] = exc
    return out, watch


def check_real_planning(out: dict[str, Any]) -> None:
    plan = out["plan"]
    assert isinstance(plan, Plan) and 1 <= len(plan.steps) <= 10
    assert all(s.tool in (None, "calculator", "echo") for s in plan.steps)
    assert [s.step_index for s in plan.steps] == list(range(1, len(plan.steps) + 1))
    refinements = out["refinements"]
    assert len(refinements) <= 3 and all(a.target_step_id in (None, "2") for a in refinements)
    steps, outcomes = apply_refinements(list(out["vague_plan"].steps), refinements, RefinementLedger())
    assert all(o.applied for o in outcomes) and steps[0] == out["vague_plan"].steps[0]
    subplan = out["subplan"]
    if isinstance(subplan, Plan):
        assert 1 <= len(subplan.steps) <= 4 and all(s.step_id.startswith("2.") for s in subplan.steps)
    else:
        assert isinstance(subplan, SupervisorError)


def test_replayed_real_model_planning_is_valid() -> None:
    """Gemma 3 270M, recorded: a valid plan; a refinement in its example's words ("Report the product of 5 and
    10" for a sum); a subplan written by the kernel planner's prompt (``9 * 9`` and a report step)."""
    out, watch = planning_with(ReplayAdapter(CASSETTE))
    assert watch.errors == []  # every request was in the cassette
    check_real_planning(out)


@pytest.mark.model
def test_the_real_model_plans_validly(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    from aeon_plugins.llama_cpp import LlamaCppAdapter

    target = CASSETTE if os.environ.get("AEON_RECORD_CASSETTES") == "1" else tmp_path / "planner.jsonl"
    target.unlink(missing_ok=True)
    adapter = RecordingAdapter(LlamaCppAdapter(), target)
    try:
        out, watch = planning_with(adapter)
    finally:
        adapter.close()
    assert watch.errors == []
    check_real_planning(out)
    print(
        json.dumps(
            {
                k: v.model_dump(mode="json") if hasattr(v, "model_dump") else str(v)
                for k, v in out.items()
                if k != "refinements"
            }
        )
    )
