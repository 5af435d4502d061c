"""The plan prompt's worked examples: chosen per request, only for tools the run has, and correct themselves."""

from __future__ import annotations

import pytest

from aeon_kernel.schemas import schema_errors
from aeon_plugins.calculator import CalculatorTool, evaluate
from aeon_plugins.calculator.review import review_calls
from aeon_plugins.echo import EchoTool
from aeon_plugins.planning.examples import EXAMPLES_SHOWN, PLAN_EXAMPLES, PlanExample, plan_examples
from aeon_plugins.planning.prompts import plan_prompt, plan_schema

TOOLS = [tool.describe() for tool in (CalculatorTool(), EchoTool())]


def requests_shown(text: str) -> list[str]:
    return [line.removeprefix("Request: ") for line in text.splitlines() if line.startswith("Request: ")]


def test_the_example_most_like_the_request_comes_last_next_to_the_request() -> None:
    shown = requests_shown(plan_examples("what is 2 to the power of 10?", ["calculator", "echo"]))
    assert len(shown) == EXAMPLES_SHOWN
    assert shown[-1] == "what is 3 to the power of 4?"
    prompt = plan_prompt("what is 2 to the power of 10?", TOOLS)
    assert prompt.index(f"Request: {shown[-1]}") > prompt.index(f"Request: {shown[0]}")


def test_examples_change_with_the_request() -> None:
    echo = requests_shown(plan_examples("repeat back exactly: hello", ["calculator", "echo"]))
    power = requests_shown(plan_examples("what is 2 to the power of 10?", ["calculator", "echo"]))
    assert echo[-1] == "repeat back exactly: the sky is blue"
    assert echo != power


@pytest.mark.parametrize(
    ("tools", "never"),
    [([], {"calculator", "echo"}), (["echo"], {"calculator"}), (["calculator"], {"echo"})],
)
def test_an_example_using_a_tool_the_run_lacks_is_never_shown(tools: list[str], never: set[str]) -> None:
    for request in ("what is 6 times 7?", "say hello", "who wrote Hamlet?"):
        text = plan_examples(request, tools)
        assert requests_shown(text), "a thinking example is always available"
        assert not any(f'"tool": "{name}"' in text for name in never)


@pytest.mark.parametrize(
    ("request_text", "nearest"),
    [
        # a word's forms are one word ("cube", "cubed"; "halve", "half"), and a shared number is no likeness
        ("Cube 4.", "what is 5 cubed?"),
        ("Halve 300", "what is half of 48?"),
    ],
)
def test_examples_are_chosen_by_words_in_any_form_not_by_numbers(request_text: str, nearest: str) -> None:
    assert requests_shown(plan_examples(request_text, ["calculator", "echo"]))[-1] == nearest


def test_choice_is_deterministic() -> None:
    assert plan_examples("add 2 and 3", ["calculator"]) == plan_examples("add 2 and 3", ["calculator"])


@pytest.mark.parametrize("example", PLAN_EXAMPLES, ids=lambda e: e.request)
def test_every_example_is_a_valid_plan_that_does_what_its_request_asks(example: PlanExample) -> None:
    """A wrong example teaches a wrong plan: each must fit the plan schema, and its tool calls must be right."""
    assert schema_errors(plan_schema(TOOLS), example.plan) == []
    for step in example.plan["steps"]:
        if step.get("tool") == "calculator":
            evaluate(step["arguments"]["expression"])  # parses and computes (raises otherwise)
        if step.get("tool") == "echo":
            assert step["arguments"]["message"] in example.request


@pytest.mark.parametrize(
    "example", [e for e in PLAN_EXAMPLES if "calculator" in e.tools], ids=lambda e: e.request
)
def test_no_calculator_example_is_one_the_calculators_review_finds_wrong(example: PlanExample) -> None:
    """A small model copies its example's shape: the calculator's own review must not find fault with it (it may
    not claim the wording: None)."""
    calculator = CalculatorTool()
    calls = [
        {"arguments": step["arguments"], "result": calculator.invoke(**step["arguments"])}
        for step in example.plan["steps"]
        if step.get("tool") == "calculator"
    ]
    found = review_calls(example.request, calls)
    assert found is None or found.approved, found
