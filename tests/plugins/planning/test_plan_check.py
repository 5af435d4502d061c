"""The plan check (issue 14 item 6): a plan that leaves out a number the request states, uses one more often than
the request does, or gives a tool a worked example's text is asked for once more, its goal fixed to the request.
The planner adds each tool's review of the calls the plan proposes to the findings, and records the outcome as a
``plan_fits_request`` check (decision 0018).

``plan_problems`` is checked on its own (including what it must not flag), then the model planner around a
scripted model that says it constrains decoding, then a whole run."""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import Engine, Orchestrator, Plan, SupervisorAction, ToolRegistry
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import Check, ModelClient
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.plan_finished import PlanFinished
from aeon_plugins.planning import ModelPlanner
from aeon_plugins.planning.grounding import plan_problems
from aeon_plugins.planning.planner import OTHER_EXAMPLES
from aeon_plugins.planning.prompts import plan_prompt, plan_schema
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor
from tests.support.builders import answer, llm_step, plan, tool_step


def calc(expression: str, description: str = "use calculator") -> dict[str, Any]:
    return {**tool_step("1", "calculator", {"expression": expression}), "description": description}


def echo(message: str) -> dict[str, Any]:
    return tool_step("1", "echo", {"message": message})


def problems(request: str, *steps: dict[str, Any], goal: str = "a goal") -> list[str]:
    numbered = [{**step, "step_id": str(n)} for n, step in enumerate(steps, 1)]
    return plan_problems(Plan.model_validate(plan(*numbered, goal=goal)).steps, request)


# --- plan_problems ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "steps", "found"),
    [
        ("(10 - 4) * 3", [calc("10 - 4"), llm_step("2")], ["The plan does not use 3 from the request."]),
        (
            "add 10 and 20, then multiply by 2, then subtract 15",
            [calc("(10 + 20) / 2")],
            ["The plan does not use 15 from the request."],
        ),
        ("(7 - 2) * (3 + 1)", [calc("7 - 2")], ["The plan does not use 3 and 1 from the request."]),
        (
            "what is the square of 12?",
            [calc("12 ^ 12")],
            ["The plan uses 12 more often than the request states it."],
        ),
        (
            "what is 15% of 200?",
            [calc("200 * 15 / 200")],
            ["The plan uses 200 more often than the request states it."],
        ),
        (
            "repeat back exactly: Aeon is small",
            [echo("the sky is blue")],
            ["'the sky is blue' is a worked example's text, not the request's."],
        ),
        (
            "what is 12 times 7?",
            [calc("6 * 7")],
            [
                "The plan does not use 12 from the request.",
                "'6 * 7' is a worked example's text, not the request's.",
            ],
        ),
    ],
)
def test_a_plan_not_written_for_the_request_is_found_out(
    request_text: str, steps: list[dict[str, Any]], found: list[str]
) -> None:
    assert problems(request_text, *steps) == found


@pytest.mark.parametrize(
    ("request_text", "steps"),
    [
        ("(10 - 4) * 3", [calc("(10 - 4) * 3"), llm_step("2")]),
        ("subtract 5 from 20, then divide the result by 3", [calc("20 - 5"), calc("15 / 3")]),
        # numbers in words are not read: nothing is required, nothing repeated
        ("what is seven plus eight?", [calc("7 + 8")]),
        ("what is one hundred minus thirty-three?", [calc("100 - 33")]),
        # a call that looks like a worked example is the request's when the request says its numbers in words
        ("what is the product of six and seven?", [calc("6 * 7")]),
        # no number at all
        ("echo the message hello world", [echo("hello world")]),
        ("tell me something about numbers", [calc("10 + 10")]),
        ("what is the weather in Paris today?", [llm_step("1", "Explain that no tool can tell the weather")]),
        # a number a step that thinks uses in words, in its description: "3-day", "3-line"
        ("plan a 3-day trip to Rome", [llm_step("1", "Plan a 3-day trip to Rome")]),
        ("write a 3-line poem about the sea", [llm_step("1", "Write a 3-line poem about the sea")]),
        # a percentage used as a share, or against 100
        ("what is 15% of 200?", [calc("0.15 * 200")]),
        ("what is 20 percent of 80?", [calc("80 * 20 / 100")]),
        # a number stated twice may be used twice; written otherwise, it is the same number
        ("calculate 9 times 9 and then echo the result", [calc("9 * 9"), echo("81")]),
        ("add 1,000 and 2.50", [calc("1000 + 2.5")]),
        # a JSON number in the arguments counts like one written in a string
        ("wait 3 seconds", [tool_step("1", "sleep", {"seconds": 3})]),
        # an example's text that the request says is the request's own
        ("repeat back exactly: the sky is blue", [echo("The sky is blue")]),
        ("what is 6 times 7?", [calc("6 * 7")]),
        ("translate 'good morning' into French", [echo("good morning")]),
    ],
)
def test_what_the_check_must_not_flag(request_text: str, steps: list[dict[str, Any]]) -> None:
    assert problems(request_text, *steps) == []


def test_the_goal_and_a_tool_steps_description_do_not_count_as_using_a_number() -> None:
    steps = [calc("10 - 4", description="Compute (10 - 4) * 3"), llm_step("2", "Report the result")]
    assert problems("(10 - 4) * 3", *steps, goal="(10 - 4) * 3") == [
        "The plan does not use 3 from the request."
    ]


def test_a_number_too_large_for_a_float_breaks_nothing() -> None:
    assert problems("use 5", tool_step("1", "t", {"n": 10**400, "m": 5})) == []
    assert problems("use " + "9" * 400, calc("1 + 1")) == []  # not a finite number: not required


# --- the model planner -----------------------------------------------------------------------------------------


class ConstrainedScript(ScriptedLLM):
    """A scripted model that says it constrains decoding to the schema it is given."""

    supports_json_schema = True


def planner(responses: list[Any], *, constrained: bool = True, **options: Any) -> tuple[ModelPlanner, Any]:
    script = ConstrainedScript(responses) if constrained else ScriptedLLM(responses)
    llm = ModelClient(script)
    validator = SchemaValidator()
    return ModelPlanner(llm, validator, DefaultSupervisor(llm, validator, TOOLS), **options), script


TOOLS = ToolRegistry([EchoTool(), CalculatorTool()])
REQUEST = "(10 - 4) * 3"
DROPPED = plan(calc("10 - 4"), llm_step("2"), goal="10 - 4")
WHOLE = plan(calc("(10 - 4) * 3"), llm_step("2"), goal=REQUEST)


def write(value: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"step_id": s["step_id"], "tool": s.get("tool"), "arguments": s.get("arguments")} for s in value]


#: what the calculator's review finds in DROPPED's call "10 - 4" for REQUEST, after the plan check's finding
DROPPED_FINDINGS = [
    "The plan does not use 3 from the request.",
    "The request writes '(10 - 4) * 3', which is 18; no calculation gives that.",
    "The request states 3, which no calculation uses.",
    "The request asks to multiply, which no calculation does.",
]


def generate(
    model: ModelPlanner, request: str = REQUEST
) -> tuple[Plan, list[SupervisorAction], list[tuple[str, str, str | None]]]:
    """The plan, the supervisor actions recorded, and the checks recorded as (name, verdict, detail)."""
    recorded: list[SupervisorAction | Check] = []
    result = model.generate_plan(request, None, TOOLS, record=recorded.append)
    actions = [a for a in recorded if isinstance(a, SupervisorAction)]
    checks = [(c.name, c.verdict, c.detail) for c in recorded if isinstance(c, Check)]
    assert len(actions) + len(checks) == len(recorded)
    return result, actions, checks


CUT_OFF = (
    '{"goal": "(10 - 4) * 3", "steps": [{"step_id": "1", "description": "Compute", "tool": "calculator", '
    + ('"arguments": {"expression": "1000000000000')
)


@pytest.mark.parametrize("constrained", [True, False])
def test_a_plan_cut_off_by_max_tokens_is_repaired_under_the_plan_schema_when_decoding_can_be_constrained(
    constrained: bool,
) -> None:
    """Unconstrained, Gemma 3 270M echoed the repair prompt back (twice) and the run failed with no plan."""
    model, script = planner([CUT_OFF, WHOLE], constrained=constrained)
    result, actions, checks = generate(model)
    assert result.steps[0].arguments == {"expression": "(10 - 4) * 3"}
    first, repair = script.prompts
    if constrained:  # the plan schema, held to what a repair of the cut text may write (FR-032)
        steps = repair["json_schema"]["properties"]["steps"]
        tools = [branch["properties"].get("tool") for branch in steps["items"]["anyOf"]]
        assert tools == [{"const": "calculator"}, None]  # not "echo": the text never named it
        assert steps["maxItems"] == 1  # the text began one step
        assert {k: v for k, v in repair["json_schema"].items() if k != "properties"} == {
            k: v for k, v in first["json_schema"].items() if k != "properties"
        }
    else:
        assert repair["json_schema"] is None
    assert [(a.action_type, a.method) for a in actions] == [("json_repair", "llm")]
    assert checks == [("plan_fits_request", "passed", None)]


def test_a_plan_that_drops_a_number_is_asked_for_again_with_the_goal_fixed_to_the_request() -> None:
    model, script = planner([DROPPED, WHOLE])
    result, actions, checks = generate(model)
    assert result.steps[0].arguments == {"expression": "(10 - 4) * 3"}
    first, second = script.prompts
    assert second["prompt"] == first["prompt"]  # the same prompt: no note (measured to make plans worse)
    tools = TOOLS.export_tools_for_llm()
    assert first["json_schema"] == plan_schema(tools)
    assert second["json_schema"] == plan_schema(tools, goal=REQUEST)
    assert second["json_schema"]["properties"]["goal"] == {"const": REQUEST}
    (action,) = actions
    assert (action.action_type, action.method, action.attempt_number) == ("plan_repair", "llm", 1)
    assert action.original_output["errors"] == DROPPED_FINDINGS
    assert write(action.original_output["steps"]) == write(DROPPED["steps"])
    assert action.repaired_output is not None and action.error is None
    assert write(action.repaired_output["steps"]) == write(WHOLE["steps"])
    assert checks == [("plan_fits_request", "resolved", "asked for again: " + " ".join(DROPPED_FINDINGS))]


def test_when_the_second_plan_fails_the_planner_asks_with_the_nearest_examples_left_out_in_turn() -> None:
    again = plan(calc("10 - 4 - 4"), llm_step("2"), goal=REQUEST)
    model, script = planner([DROPPED, again, WHOLE])
    result, (action,), checks = generate(model)
    assert result.steps[0].arguments == {"expression": "(10 - 4) * 3"}
    first, second, third = (p["prompt"] for p in script.prompts)
    tools = TOOLS.export_tools_for_llm()
    assert second == first and third == plan_prompt(REQUEST, tools, leave_out=0) != first
    assert action.repaired_output is not None and action.error is None
    assert checks == [("plan_fits_request", "resolved", "asked for again: " + " ".join(DROPPED_FINDINGS))]


def test_when_every_plan_asked_for_again_fails_too_the_first_is_kept_and_the_attempt_recorded() -> None:
    again = plan(calc("10 - 4 - 4"), llm_step("2"), goal=REQUEST)
    model, script = planner([DROPPED, again, again, again])
    result, (action,), checks = generate(model)
    assert [p["prompt"] for p in script.prompts[2:]] == [
        plan_prompt(REQUEST, TOOLS.export_tools_for_llm(), leave_out=rank) for rank in OTHER_EXAMPLES
    ]
    assert result.steps[0].arguments == {"expression": "10 - 4"}
    assert action.repaired_output is None and action.error is not None
    assert action.error["message"] == (
        "The plan asked for again fails too: The plan does not use 3 from the request. The plan uses 4 more "
        "often than the request states it. The request writes '(10 - 4) * 3', which is 18; no calculation gives "
        "that. The request states 3, which no calculation uses. The calculation uses 4 twice; the request states "
        "it once. The request asks to multiply, which no calculation does. The first plan is kept."
    )
    # the first plan's findings stay: an inconclusive check (the plan check can raise a false alarm)
    assert checks == [("plan_fits_request", "inconclusive", " ".join(DROPPED_FINDINGS))]
    assert write(action.error["reply"]["steps"]) == [
        {"step_id": "1", "tool": "calculator", "arguments": {"expression": "10 - 4 - 4"}},
        {"step_id": "2", "tool": None, "arguments": None},
    ]


def test_a_second_reply_that_is_no_plan_keeps_the_first() -> None:
    # not JSON; the supervisor's two repair attempts get no plan either (each time it is asked again)
    model, script = planner([DROPPED, *["no plan here", "still none", "none"] * (1 + len(OTHER_EXAMPLES))])
    result, actions, checks = generate(model)
    assert result.steps[0].arguments == {"expression": "10 - 4"}
    assert len(script.prompts) == 1 + 3 * (1 + len(OTHER_EXAMPLES))
    assert checks == [("plan_fits_request", "inconclusive", " ".join(DROPPED_FINDINGS))]
    check = actions[-1]
    assert check.action_type == "plan_repair" and check.original_output["errors"]
    assert check.error is not None and check.error["message"].startswith(
        "The plan asked for again is not valid"
    )
    assert check.error["message"].endswith("The first plan is kept.")


def test_a_plan_that_fits_the_request_is_asked_for_once() -> None:
    model, script = planner([WHOLE])
    result, actions, checks = generate(model)
    assert result.goal == REQUEST and actions == [] and len(script.prompts) == 1
    assert checks == [("plan_fits_request", "passed", None)]


@pytest.mark.parametrize(
    ("options", "constrained", "request_text"),
    [
        ({"check": False}, True, REQUEST),  # [planner] check = false
        ({}, False, REQUEST),  # a second request to a model the schema does not bind would be the first again
        ({}, True, REQUEST + " " + "x" * 200),  # too long to be written out as the goal
    ],
)
def test_when_the_plan_is_not_asked_for_again(
    options: dict[str, Any], constrained: bool, request_text: str
) -> None:
    model, script = planner([DROPPED], constrained=constrained, **options)
    result, actions, checks = generate(model, request_text)
    assert result.steps[0].arguments == {"expression": "10 - 4"}
    assert actions == [] and len(script.prompts) == 1
    if options.get("check") is False:
        assert checks == []  # no check at all
    else:  # checked, not asked again: what the check finds stays, as an inconclusive check
        ((name, verdict, detail),) = checks
        assert (name, verdict) == ("plan_fits_request", "inconclusive")
        assert detail is not None and detail.startswith("The plan does not use 3 from the request.")


def test_the_check_in_a_run_is_logged_as_the_repair_of_the_plan_cycle() -> None:
    script = ConstrainedScript([DROPPED, WHOLE, answer("(10 - 4) * 3 is 18.")])
    llm = ModelClient(script)
    validator = SchemaValidator()
    supervisor = DefaultSupervisor(llm, validator, TOOLS)
    orchestrator = Orchestrator(
        llm, InMemoryKVStore(), TOOLS, supervisor, validator, convergence=PlanFinished()
    )
    entries = list(orchestrator.iter(REQUEST))
    result = orchestrator.result
    assert result is not None
    assert (result["status"], result["answer"]) == ("completed", "(10 - 4) * 3 is 18.")
    assert result["verification"]["verdict"] == "verified"
    assert [c["result"]["value"] for c in result["final_state"]["tool_history"]] == [18]
    (action,) = entries[0].supervisor_actions
    assert entries[0].phase == "plan"
    assert action.original_output["errors"] == DROPPED_FINDINGS
    assert [(c.name, c.verdict) for c in entries[0].checks] == [("plan_fits_request", "resolved")]
    (logged,) = result["final_state"]["supervisor_actions"]
    assert logged["original_output"]["errors"] == action.original_output["errors"]


@pytest.mark.parametrize("check", [True, False])
def test_the_check_is_a_planner_option_on_by_default(check: bool) -> None:
    config = AeonConfig().with_choice("llm", "scripted", responses=[])
    with Engine(config) as engine:
        assert engine.planner.check is True
    with Engine(config.with_choice("planner", "model", check=check)) as engine:
        assert engine.planner.check is check


NO_TOOL = plan(llm_step("1", "Say that no tool can tell the time"), goal="no tool applies")
ADDITION = plan(calc("17 + 26"), llm_step("2"), goal="what is 17 plus 26?")


def test_a_plan_that_calls_no_tool_for_a_calculation_is_asked_for_again() -> None:
    """Seen on the embedded model: "No tool can tell the time." for a word problem, ending ``completed``. With no
    tool in the plan, each tool's review of no call says whether the request asks something of it."""
    model, script = planner([NO_TOOL, ADDITION])
    result, (action,), checks = generate(model, "what is 17 plus 26?")
    assert result.steps[0].arguments == {"expression": "17 + 26"} and len(script.prompts) == 2
    finding = "The request asks to add with its numbers; no step calls the calculator to do it."
    assert finding in action.original_output["errors"]
    assert [(name, verdict) for name, verdict, _ in checks] == [("plan_fits_request", "resolved")]


def test_a_calculation_in_words_that_no_tool_does_is_found_by_the_calculators_review() -> None:
    """The plan check reads digits only: "seventeen plus twenty-six" left to the model is the review's finding."""
    model, _ = planner([NO_TOOL, ADDITION])
    _, (action,), _ = generate(model, "what is seventeen plus twenty-six?")
    assert action.original_output["errors"] == [
        "The request asks to add with its numbers; no step calls the calculator to do it."
    ]


def test_a_plan_that_calls_no_tool_stays_unverified_when_asked_again_in_vain() -> None:
    model, _ = planner([NO_TOOL] * (2 + len(OTHER_EXAMPLES)))
    result, _, checks = generate(model, "A train goes 60 km per hour for 3 hours. How far does it go?")
    assert result.steps[0].tool is None
    assert [(name, verdict) for name, verdict, _ in checks] == [("plan_fits_request", "inconclusive")]


@pytest.mark.parametrize(
    "request_text",
    ["What is the capital of France?", "Translate 'cat' into French", "Who wrote Hamlet?"],
)
def test_a_plan_that_calls_no_tool_for_a_request_no_tool_fits_is_asked_for_once(request_text: str) -> None:
    model, script = planner([NO_TOOL])
    _, actions, checks = generate(model, request_text)
    assert len(script.prompts) == 1 and not actions
    assert checks == [("plan_fits_request", "passed", None)]


def test_unrelated_calls_are_left_out_and_the_steps_that_then_repeat_with_them() -> None:
    """Gemma 3 270M planned "Write a haiku about autumn" as ten calculator steps of that description; with the calls
    left out, ten model steps would ask the same thing ten times (22 model calls in the frozen set's run)."""
    request_text = "Write a haiku about autumn"
    haiku = [{**calc("6 * 7", request_text), "step_id": str(n)} for n in range(1, 4)]
    written = plan(*haiku, llm_step("4"), goal=request_text)
    model, _ = planner([written] * (2 + len(OTHER_EXAMPLES)))
    result, _, checks = generate(model, request_text)
    assert [(s.step_id, s.tool, s.agent) for s in result.steps] == [("1", None, "llm"), ("4", None, "llm")]
    ((name, verdict, detail),) = checks
    assert (name, verdict) == ("plan_fits_request", "resolved")
    assert detail is not None and detail.endswith(
        "The calls to calculator were left out, and 2 steps that only repeated the one before."
    )
