"""Self-consistency as a check (issue 26): with ``[planner] samples = N`` the ``model`` planner writes N more plans,
each from the worked examples with one of the nearest left out, runs their pure tools itself and records whether
they give the plan's result (``plans_agree``). Disagreement leaves the result unverified, never contradicted.

``outcome`` and ``agreement`` are checked on their own, then the planner around a scripted model, then whole runs
and the configuration."""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import ConfigError, Engine, Orchestrator, Plan, ToolRegistry, tool
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import Check, ModelClient
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.plan_finished import PlanFinished
from aeon_plugins.planning import ModelPlanner
from aeon_plugins.planning.agreement import Outcome, agreement, outcome, same
from aeon_plugins.planning.examples import plan_examples
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.scripted import ScriptedLLM
from aeon_plugins.supervisor import DefaultSupervisor
from tests.support.builders import answer, llm_step, plan, tool_step

TOOLS = ToolRegistry([EchoTool(), CalculatorTool()])
REQUEST = "add 7 and 5, then multiply the result by 3"


def calc(*expressions: str) -> dict[str, Any]:
    steps = [tool_step(str(n), "calculator", {"expression": e}) for n, e in enumerate(expressions, 1)]
    return plan(*steps, llm_step(str(len(steps) + 1)), goal=REQUEST)


def result_of(value: dict[str, Any], tools: ToolRegistry = TOOLS) -> Outcome:
    return outcome(Plan.model_validate(value), tools)


# --- outcome: what a plan's pure calls give before it runs -------------------------------------------------------


def test_the_outcome_is_the_last_calls_result_without_what_echoes_its_arguments() -> None:
    assert result_of(calc("(7 + 5) * 3")) == Outcome(value={"value": 36})
    assert result_of(calc("7 + 5", "12 * 3")) == Outcome(value={"value": 36})
    assert result_of(calc("7 + 5", "12 * 2")) == Outcome(value={"value": 24})


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (plan(llm_step("1")), "it calls no tool"),
        (plan(tool_step("1", "echo", {"message": "hi"})), "it calls echo, which is not a pure tool"),
        (plan(tool_step("1", "calculator"), llm_step("2")), "step 1's arguments are written when it runs"),
        (calc("7 / 0"), "calculator failed: "),
        (calc("7 + 5", "1 / 0"), "calculator failed: "),
    ],
)
def test_a_plan_with_no_result_before_it_runs_says_why(value: dict[str, Any], problem: str) -> None:
    found = result_of(value)
    assert found.value is None and found.problem is not None and found.problem.startswith(problem)


def test_a_pure_tool_that_declares_permissions_is_not_called() -> None:
    calls: list[int] = []

    @tool(pure=True, permissions={"count": "count calls"}, name="counter")
    def counter(n: int) -> int:
        """Count."""
        calls.append(n)
        return n

    granted = counter.model_copy(update={"granted": frozenset({"count"})})
    found = result_of(plan(tool_step("1", "counter", {"n": 1})), ToolRegistry([granted]))
    assert found.problem == "it calls counter, which is not a pure tool" and calls == []


def test_a_pure_function_tool_is_called_with_its_arguments_checked() -> None:
    @tool(pure=True)
    def double(n: int) -> int:
        """Double n."""
        return 2 * n

    tools = ToolRegistry([double])
    assert double.pure and not EchoTool().pure and CalculatorTool().pure
    assert result_of(plan(tool_step("1", "double", {"n": 21})), tools) == Outcome(value={"result": 42})
    bad = result_of(plan(tool_step("1", "double", {"n": "x"})), tools)
    assert bad.problem is not None and bad.problem.startswith("double failed: double arguments invalid")


# --- agreement -------------------------------------------------------------------------------------------------


def test_samples_that_all_give_the_plans_result_pass() -> None:
    check = agreement(Outcome(value={"value": 36}), [Outcome(value={"value": 36.0})] * 2)
    assert (check.name, check.subject, check.verdict) == ("plans_agree", "plan", "passed")
    assert check.detail == '2 more plans, written from other worked examples, give {"value":36} too'


def test_one_sample_that_differs_or_gives_nothing_makes_the_check_inconclusive_never_failed() -> None:
    samples = [
        Outcome(value={"value": 36}),
        Outcome(value={"value": 21}),
        Outcome(problem="it calls no tool"),
    ]
    check = agreement(Outcome(value={"value": 36}), samples)
    assert check.verdict == "inconclusive"
    assert check.detail == (
        '2 of 3 plans written from other worked examples disagree with this one\'s {"value":36}: '
        '{"value":21}; no result (it calls no tool)'
    )


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (0.1 + 0.2, 0.3, True),
        (36, 36.0, True),
        (36, 36.001, False),
        (True, 1, False),
        ({"value": 1, "unit": "m"}, {"unit": "m", "value": 1.0}, True),
        ({"value": 1}, {"value": 1, "unit": "m"}, False),
        ([1, 2], [1, 2.0], True),
        ([1, 2], [2, 1], False),
        ("6", 6, False),
    ],
)
def test_values_are_compared_as_json_with_numbers_within_rounding(a: Any, b: Any, equal: bool) -> None:
    assert same(a, b) is equal and same(b, a) is equal


# --- the planner -----------------------------------------------------------------------------------------------


class ConstrainedScript(ScriptedLLM):
    supports_json_schema = True


def planner(responses: list[Any], **options: Any) -> tuple[ModelPlanner, ConstrainedScript]:
    script = ConstrainedScript(responses)
    llm = ModelClient(script)
    validator = SchemaValidator()
    return ModelPlanner(llm, validator, DefaultSupervisor(llm, validator, TOOLS), **options), script


def checks_of(model: ModelPlanner, request: str = REQUEST) -> list[Check]:
    recorded: list[Any] = []
    model.generate_plan(request, None, TOOLS, record=recorded.append)
    return [c for c in recorded if isinstance(c, Check)]


def test_each_sample_is_written_from_the_examples_with_one_of_the_nearest_left_out() -> None:
    model, script = planner([calc("(7 + 5) * 3"), calc("3 * (7 + 5)"), calc("7 + 5", "12 * 3")], samples=2)
    checks = checks_of(model)
    assert [(c.name, c.verdict) for c in checks] == [
        ("plan_fits_request", "passed"),
        ("plans_agree", "passed"),
    ]
    first, *samples = (p["prompt"] for p in script.prompts)
    names = [t.name for t in TOOLS]
    shown = plan_examples(REQUEST, names)
    requests = [line for line in shown.split("\n") if line.startswith("Request: ")]
    for rank, prompt in enumerate(samples):
        # only the examples differ
        assert prompt == first.replace(shown, plan_examples(REQUEST, names, leave_out=rank))
        left_out = requests[-1 - rank]  # the examples are shown nearest last
        assert left_out in first and left_out not in prompt
    assert len({p["prompt"] for p in script.prompts}) == 3


def test_a_sample_that_disagrees_leaves_the_check_inconclusive() -> None:
    model, _ = planner([calc("(7 + 5) * 3"), calc("7 + 5 * 3"), calc("(7 + 5) * 3")], samples=2)
    (fits, agree) = checks_of(model)
    assert fits.verdict == "passed" and agree.verdict == "inconclusive"
    assert agree.detail is not None and '{"value":22}' in agree.detail


def test_a_sample_that_is_no_plan_counts_as_disagreeing() -> None:
    model, _ = planner([calc("(7 + 5) * 3"), "no plan", "still none", "none"], samples=1)
    (_, agree) = checks_of(model)
    assert agree.verdict == "inconclusive"
    assert agree.detail is not None and "no result (no valid plan: " in agree.detail


def test_no_sample_is_asked_for_a_plan_whose_result_is_not_known_before_it_runs() -> None:
    model, script = planner([plan(tool_step("1", "echo", {"message": "hi"}), goal="say hi")], samples=3)
    assert [c.name for c in checks_of(model, "say hi")] == ["plan_fits_request"]
    assert len(script.prompts) == 1


def test_without_samples_no_more_plans_are_asked_for() -> None:
    model, script = planner([calc("(7 + 5) * 3")])
    assert [c.name for c in checks_of(model)] == ["plan_fits_request"] and len(script.prompts) == 1


# --- whole runs --------------------------------------------------------------------------------------------------


def run(responses: list[Any], samples: int) -> dict[str, Any]:
    script = ConstrainedScript(responses)
    llm = ModelClient(script)
    validator = SchemaValidator()
    supervisor = DefaultSupervisor(llm, validator, TOOLS)
    model = ModelPlanner(llm, validator, supervisor, samples=samples)
    orchestrator = Orchestrator(
        llm, InMemoryKVStore(), TOOLS, supervisor, validator, planner=model, convergence=PlanFinished()
    )
    for _ in orchestrator.iter(REQUEST):
        pass
    result = orchestrator.result
    assert result is not None
    assert (result["status"], result["answer"]) == ("completed", "The result is 36.")
    return dict(result)


def test_a_run_whose_samples_agree_is_verified_and_one_whose_samples_disagree_is_not() -> None:
    right = [calc("(7 + 5) * 3"), answer("The result is 36.")]
    agreed = run([right[0], calc("3 * (7 + 5)"), right[1]], samples=1)
    assert agreed["verification"]["verdict"] == "verified"
    assert "plans_agree" in [c["name"] for c in agreed["verification"]["checks"]]
    disagreed = run([right[0], calc("7 + 5 * 3"), right[1]], samples=1)
    assert disagreed["verification"]["verdict"] == "unverified"
    assert disagreed["verification"]["reason"].startswith("plans_agree")
    assert run(right, samples=0)["verification"]["verdict"] == "verified"  # the default asks no sample


@pytest.mark.parametrize("samples", [-1, 6, "2", True, 1.0])
def test_samples_out_of_range_are_a_config_error(samples: Any) -> None:
    config = AeonConfig().with_choice("llm", "scripted", responses=[])
    chosen = config.with_choice("planner", "model", samples=samples)
    with (
        pytest.raises(ConfigError, match=r"samples is how many more plans .* \(0-5\)"),
        Engine(chosen) as engine,
    ):
        engine.build_selected()


@pytest.mark.parametrize("planner_name", ["model", "recursive"])
def test_samples_is_an_option_of_both_planners(planner_name: str) -> None:
    config = AeonConfig().with_choice("llm", "scripted", responses=[])
    with Engine(config.with_choice("planner", planner_name, samples=2)) as engine:
        assert engine.planner.samples == 2
    with Engine(config.with_choice("planner", planner_name)) as engine:
        assert engine.planner.samples == 0
