"""Grounded answers (issue 14 item 5) and the state a prompt carries (FR-002): the real loop, a scripted model."""

from __future__ import annotations

import importlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aeon_kernel import AeonConfig, Engine, StepStatus
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.planning.grounding import (
    facts_in,
    false_claim,
    grounding_problem,
    numbers_in,
    unsupported_numbers,
)
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step

PRODUCT_PLAN = plan(
    tool_step("1", "calculator", {"expression": "6 * 7"}), llm_step("2"), goal="Multiply 6 by 7"
)
REQUEST = "what is 6 times 7?"


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("6 times 7 is 42.", [6, 7, 42]),
        ("1,024 bytes", [1024]),
        ("a 3-day trip costs 12.5 euros", [3, 12.5]),
        ("mp3 files, step_2, v1.2", []),
        ("6.02e23 atoms", [6.02e23]),
    ],
)
def test_numbers_are_read_as_an_answer_writes_them(text: str, numbers: list[float]) -> None:
    assert [value for _, value in numbers_in(text)] == numbers


@pytest.mark.parametrize(
    ("answer_text", "facts", "unsupported"),
    [
        ("6 times 7 is 42.", [REQUEST, {"expression": "6 * 7", "value": 42}], []),
        ("6 times 7 is 48.", [REQUEST, {"expression": "6 * 7", "value": 42}], ["48"]),
        ("100 divided by 8 is 12.5", ["divide 100 by 8", {"value": 12.5}], []),
        ("about 13", [{"value": 12.5}], []),  # rounded to the precision the answer shows
        ("about 14", [{"value": 12.5}], ["14"]),
        ("one third is 0.33", [{"value": 1 / 3}], []),
        ("one third is 0.34", [{"value": 1 / 3}], ["0.34"]),
        ("the difference is 3", [{"value": -3}], []),
        # a sign written on a number is read: "-60" is not the 60 the tool gave; a subtraction's minus is no sign
        ("30 - 90 is -60.", ["90 minus 30", {"expression": "90 - 30", "value": 60}], ["-60"]),
        ("4 - 7 is -3", [{"expression": "4 - 7", "value": -3}], []),
        ("x = -7", [{"value": 7}], ["-7"]),
        ("90-30 is 60", [{"expression": "90 - 30", "value": 60}], []),
        ("2 to the 10th is 1,024", ["2 to the power of 10", {"value": 1024}], []),
        ("there is no number here", [{"value": 7}], []),
    ],
)
def test_unsupported_numbers(answer_text: str, facts: list[object], unsupported: list[str]) -> None:
    assert unsupported_numbers(answer_text, facts_in(facts)) == unsupported


@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=10**12))
def test_a_result_stated_as_is_is_grounded_and_any_other_integer_is_not(value: int, other: int) -> None:
    facts = facts_in([{"value": value}])
    assert unsupported_numbers(f"the result is {value}", facts) == []
    assert unsupported_numbers(f"the result is {value:,}", facts) == []
    if other != value:
        assert unsupported_numbers(f"the result is {other}", facts) == [str(other)]


def test_numbers_too_large_for_a_float_are_no_facts_and_break_nothing() -> None:
    assert facts_in([{"value": 10**400}, {"value": 7}]) == {7.0}
    assert unsupported_numbers("it is " + "9" * 400, {7.0}) == []  # not a finite number: not read as one


def test_a_grounded_answer_is_kept_with_one_model_call(make_harness: MakeHarness) -> None:
    h = make_harness([PRODUCT_PLAN, answer("6 times 7 is 42.")])
    result = h.run(REQUEST)
    assert (result["status"], result["answer"]) == ("completed", "6 times 7 is 42.")
    assert len(h.llm.prompts) == 2


def test_an_answer_contradicting_its_tool_is_asked_again_told_why(make_harness: MakeHarness) -> None:
    h = make_harness([PRODUCT_PLAN, answer("6 times 7 is 48."), answer("6 times 7 is 42.")])
    result = h.run(REQUEST)
    assert (result["status"], result["answer"]) == ("completed", "6 times 7 is 42.")
    retry = h.llm.prompts[2]["prompt"]
    assert (
        'Your first answer was "6 times 7 is 48.". It states 48, which no result above says. Answer again'
        in retry
    )
    step = h.orchestrator.get_state().plan.steps[1]
    assert step.status is StepStatus.COMPLETE and step.errors == ()


def test_an_answer_contradicting_its_tool_twice_is_replaced_by_the_tool_result(
    make_harness: MakeHarness,
) -> None:
    h = make_harness([PRODUCT_PLAN, answer("6 times 7 is 48."), answer("It is 36.")])
    result = h.run(REQUEST)
    assert result["status"] == "completed"
    assert result["answer"] == "6 * 7 is 42."  # the tools' result as a sentence (grounding.tool_answer)
    assert result["verification"]["verdict"] == "verified"
    (grounded,) = [c for c in result["verification"]["checks"] if c["name"] == "answer_grounded"]
    assert (grounded["verdict"], grounded["step_id"]) == ("resolved", "2")
    assert unsupported_numbers(result["answer"], facts_in([REQUEST, {"value": 42}])) == []
    (note,) = result["final_state"]["errors"]
    assert note["type"] == "StepNote" and note["step_id"] == "2"
    assert "contradicted the tools twice (It states 36, which no result above says.)" in note["message"]
    assert note["message"].endswith("answered with the last tool result")
    assert len(h.llm.prompts) == 3  # one retry, no more


@pytest.mark.parametrize(
    ("check", "calls", "final"), [(True, 3, "6 times 7 is 42."), (False, 2, "6 times 7 is 48.")]
)
def test_the_answer_check_is_the_planners_and_its_check_option_switches_it(
    check: bool, calls: int, final: str
) -> None:
    """``[planner] check = false`` turns off the grounding of answers too (the planner owns it, issue 25): the
    contradicting answer is then kept as the model wrote it, with no second model call."""
    replies = [PRODUCT_PLAN, answer("6 times 7 is 48."), answer("6 times 7 is 42.")]
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=replies)
        .with_choice("planner", "model", check=check)
    )
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    with Engine(config, autoload=False, plugins=builtins) as engine:
        result = engine.run(REQUEST)
        assert (result["status"], result["answer"]) == ("completed", final)
        assert len(engine.llm.adapter.prompts) == calls


def test_a_final_report_that_does_not_state_the_result_is_asked_again(make_harness: MakeHarness) -> None:
    h = make_harness([PRODUCT_PLAN, answer("I multiplied 6 by 7."), answer("It is 42.")])
    assert h.run(REQUEST)["answer"] == "It is 42."
    assert "It does not state the result the tools gave." in h.llm.prompts[2]["prompt"]


def test_an_answer_that_is_not_the_last_step_need_not_state_the_result(make_harness: MakeHarness) -> None:
    middle = plan(
        tool_step("1", "calculator", {"expression": "6 * 7"}),
        llm_step("2", "explain the method"),
        tool_step("3", "echo", {"message": "done"}),
    )
    h = make_harness([middle, answer("I multiplied 6 by 7.")])
    # the request asks for the echo's text, so the echo step stays a tool call (no model answer in its place)
    assert h.run("what is 6 times 7? explain the method, then say done")["status"] == "completed"
    assert len(h.llm.prompts) == 2


def test_a_failed_tool_grounds_nothing_but_its_arguments(make_harness: MakeHarness) -> None:
    zero = plan(tool_step("1", "calculator", {"expression": "10 / (5 - 5)"}), llm_step("2"))
    h = make_harness([zero, answer("10 divided by (5 - 5) is 42."), answer("It is 2.")])
    result = h.run("what is 10 divided by (5 - 5)?")
    assert result["status"] == "failed"  # the calculator's step failed
    # the tool's failure as a sentence (grounding.tool_answer), not the model's invented numbers
    assert result["answer"] == "The calculator could not do it: calculator failed: division by zero."


def test_the_examples_answer_copied_for_another_request_is_refused(make_harness: MakeHarness) -> None:
    h = make_harness([plan(llm_step("1", "Answer")), answer("6 times 7 is 42."), answer("6 times 7 is 42.")])
    result = h.run("what is the weather in Paris?")
    assert result["status"] == "failed"
    (step,) = result["final_state"]["plan"]["steps"]
    assert (
        "copies the example's answer" in step["failure"]
        and "no tool result to answer from" in step["failure"]
    )
    assert make_harness([PRODUCT_PLAN, answer("6 times 7 is 42.")]).run(REQUEST)["status"] == "completed"


def test_without_a_tool_result_there_is_nothing_to_contradict(make_harness: MakeHarness) -> None:
    h = make_harness([plan(llm_step("1", "Name the author of Hamlet")), answer("Shakespeare, in 1600.")])
    assert h.run("who wrote Hamlet?")["answer"] == "Shakespeare, in 1600."
    assert len(h.llm.prompts) == 2


def test_the_prompt_lists_every_step_in_plan_order_with_status_and_result(make_harness: MakeHarness) -> None:
    """FR-002: steps 1..11 in plan order (not "10" before "2"), each with its status; results beside their step."""
    steps = [tool_step(str(i), "echo", {"message": f"m{i}"}) for i in range(1, 11)]
    h = make_harness([plan(*steps, llm_step("11")), answer("done")])
    h.run("echo ten things")
    prompt = h.llm.prompts[1]["prompt"]
    state = prompt[prompt.index("Request: echo ten things") :]  # after the worked example
    lines = [line for line in state.splitlines() if line.startswith("Step ")]
    assert [line.split()[1] for line in lines] == [str(i) for i in range(1, 12)]
    assert lines[0] == 'Step 1 [complete] use echo. Result: {"message": "m1"}'
    assert lines[9] == 'Step 10 [complete] use echo. Result: {"message": "m10"}'
    assert lines[10] == "Step 11 [running] report the result"


@pytest.mark.parametrize(
    ("reply", "found"),
    [
        ("Write a haiku about autumn.", True),  # Gemma 3 270M's answer to it, under the answer schema
        ("write a haiku about   AUTUMN", True),
        ("Leaves fall, the air cools, the year turns.", False),
        ("autumn", False),  # a short answer is an answer: it is not the request said again
    ],
)
def test_an_answer_that_only_says_the_request_again_is_no_answer(reply: str, found: bool) -> None:
    problem = grounding_problem(reply, "Write a haiku about autumn", [], final=True)
    assert (problem == "It repeats the request instead of answering it.") is found


# --- a calculation the answer states must come to what it says ---------------------------------------------------

FACTS = {96.0, 8.0, 11.0, 12.0, 132.0, 1200.0, 4.0, 300.0, 3.0, 0.5}


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (
            "96 divided by 8 is 132.",
            "It says 96 / 8 is 132, but 96 / 8 is 12.",
        ),  # each number grounded, not the sum
        ("13 times 3 is 132", "It says 13 * 3 is 132, but 13 * 3 is 39."),
        ("8 divided by 12 is 8 / 12.", "It says 8 / 12 is 8 / 12, which no result above comes to."),
        ("(96 / 8) * 11 is 132.", None),
        ("96 / 8 = 12, and 12 * 11 = 132.", None),
        ("1,200 / 4 is 300", None),  # a thousands separator is no operator
        ("12 \u00d7 11 = 132", None),
        ("96 / 8 is 12.0", None),
        ("The answer is 132.", None),  # no calculation stated
        ("It is 11 plus 1, which is 12.", None),  # a calculation with no value said
    ],
)
def test_a_calculation_the_answer_states_must_come_to_what_it_says(reply: str, problem: str | None) -> None:
    assert false_claim(reply, FACTS) == problem


def test_a_rounded_value_is_what_the_calculation_comes_to() -> None:
    assert false_claim("10 / 3 is 3.33", {10.0, 3.0, 10 / 3}) is None
    assert false_claim("10 / 3 is 3.3", {10.0, 3.0, 10 / 3}) is None
    assert (
        false_claim("10 / 3 is 4", {10.0, 3.0, 10 / 3, 4.0})
        == "It says 10 / 3 is 4, but 10 / 3 is 3.33333333333333."
    )


def test_an_answer_whose_calculation_is_false_is_asked_again(make_harness: MakeHarness) -> None:
    """Seen on Gemma 3 270M: "96 divided by 8 is 132." for (96 / 8) * 11, and "3 + 4 * 5 = 35" for (3 + 4) * 5:
    every number grounded, the sentence false."""
    h = make_harness([PRODUCT_PLAN, answer("7 times 7 is 42."), answer("6 times 7 is 42.")])
    result = h.run(REQUEST)
    assert (result["status"], result["answer"]) == ("completed", "6 times 7 is 42.")
    assert "It says 7 * 7 is 42, but 7 * 7 is 49. Answer again" in h.llm.prompts[2]["prompt"]
