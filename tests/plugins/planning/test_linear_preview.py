"""The linear scheduler's preview (``LinearPlanScheduler.preview``): what the step-through page shows before each
cycle — the plan generation with its prompt, then each step with its context and prompt — told without doing
anything, and what the cycle then does."""

from __future__ import annotations

from aeon_kernel import Plan
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step
from tests.support.previews import previewed, shown

REQUEST = "add 5 and 10, then say so"
THREE_STEPS = plan(
    tool_step("1", "calculator", {"expression": "5 + 10"}),
    tool_step("2", "calculator"),  # its arguments come from the model
    llm_step("3", "Report the sum"),
)


def test_each_preview_tells_the_cycle_that_follows_and_changes_nothing(make_harness: MakeHarness) -> None:
    harness = make_harness([THREE_STEPS, {"expression": "15 * 1"}, answer("The sum is 15")])
    cycles = previewed(harness.orchestrator.start(REQUEST), lambda: len(harness.llm.prompts))
    assert shown(cycles) == [
        ("plan", "plan generation"),
        ("step", "step 1"),
        ("step", "step 2"),
        ("step", "step 3"),
    ]
    (planning, _), (first, _), (second, _), (third, _) = cycles
    assert planning.details["request"] == REQUEST and REQUEST in planning.details["prompt"]
    assert planning.details["prompt"] == harness.llm.prompts[0]["prompt"]  # what the planner then sent
    assert first.details["step"] == {
        "step_id": "1",
        "description": "use calculator",
        "does": "calculator",
        "arguments": {"expression": "5 + 10"},
        "status": "pending",
    }
    assert first.details["prompt"] is None and first.what.startswith("Step 1 of 3: calculator runs")
    assert "Step 1 [running] use calculator" in first.details["context"]
    # a tool step without arguments: the prompt that asks for them, the summary with step 1's result in it
    assert second.details["prompt"] == harness.llm.prompts[1]["prompt"]
    assert "Step 1 [complete] use calculator. Result:" in second.details["context"]
    assert (
        third.details["step"]["does"] == "model"
        and third.details["prompt"] == harness.llm.prompts[2]["prompt"]
    )


def test_a_run_given_its_plan_previews_its_first_step(make_harness: MakeHarness) -> None:
    harness = make_harness([])
    run = harness.orchestrator.start(REQUEST, initial_plan=Plan.model_validate(plan(THREE_STEPS["steps"][0])))
    assert shown(previewed(run, lambda: len(harness.llm.prompts))) == [("step", "step 1")]


def test_a_run_with_no_plan_after_its_first_cycle_previews_its_end(make_harness: MakeHarness) -> None:
    harness = make_harness(["not a plan"] * 3)
    run = harness.orchestrator.start(REQUEST)
    cycles = previewed(run)
    assert shown(cycles) == [("plan", "plan generation")]
    assert run.result is not None and run.result.status == "failed"
