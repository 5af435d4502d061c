"""Verified results (issue 26, decision 0018): every result says how it was checked and never claims more.

Real components around a scripted model: the calculator's and the echo's reviews, the model planner's plan
check, the kernel's review of the calls a run made, the answer check; then the verdict's rules on their own.
"""

from __future__ import annotations

from typing import Any

import pytest

from aeon_kernel import AeonConfig, Engine, Tool, tool
from aeon_kernel.kit import Check, Review, verify
from aeon_kernel.models import ToolCall
from aeon_plugins.calculator import CalculatorTool
from aeon_plugins.echo import EchoTool
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step


def calc_plan(expression: str, goal: str = "a goal") -> dict[str, Any]:
    return plan(tool_step("1", "calculator", {"expression": expression}), llm_step("2"), goal=goal)


def checks_named(result: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for c in result["verification"]["checks"] if c["name"] == name]


def test_a_right_calculation_is_verified_and_its_checks_are_in_the_log_and_the_state(
    make_harness: MakeHarness,
) -> None:
    h = make_harness([calc_plan("(2 + 3) * 4"), answer("(2 + 3) * 4 is 20.")])
    result = h.run("add 2 and 3, then multiply the result by 4")
    assert result["status"] == "completed"
    verification = result["verification"]
    assert verification["verdict"] == "verified", verification
    (review,) = checks_named(result, "review")
    assert (review["by"], review["verdict"], review["subject"]) == ("calculator", "passed", "tool_call")
    (grounded,) = checks_named(result, "answer_grounded")
    assert (grounded["verdict"], grounded["step_id"]) == ("passed", "2")
    assert [c["name"] for c in result["final_state"]["checks"]] == [c["name"] for c in verification["checks"]]
    logged = [c.name for entry in h.entries for c in entry.checks]
    assert "answer_grounded" in logged and "plan_fits_request" in logged  # each cycle's line carries its own


def test_a_calculation_that_drops_an_operation_is_contradicted_and_the_run_does_not_complete(
    make_harness: MakeHarness,
) -> None:
    """Gemma 3 270M wrote `(11 + 4) / 3` for "add 11 and 4, then multiply the result by 3", and the run said
    completed."""
    h = make_harness([calc_plan("(11 + 4) / 3"), answer("(11 + 4) / 3 is 5.")])
    result = h.run("add 11 and 4, then multiply the result by 3")
    assert result["status"] == "failed"
    assert result["answer"] == "(11 + 4) / 3 is 5."  # kept, not lost
    assert result["verification"]["verdict"] == "contradicted"
    assert "multiply" in result["verification"]["reason"]
    assert result["message"].startswith("not verified: ") and "multiply" in result["message"]
    assert all(s["status"] == "complete" for s in result["plan"]["steps"])  # every step did complete


def test_an_answer_of_the_models_own_words_is_unverified(make_harness: MakeHarness) -> None:
    h = make_harness(
        [plan(llm_step("1", "Say something about numbers"), goal="numbers"), answer("Numbers count.")]
    )
    result = h.run("tell me something about numbers")
    assert result["status"] == "completed"
    assert result["verification"]["verdict"] == "unverified"
    assert "model's own words" in result["verification"]["reason"]


def test_a_tool_that_cannot_review_its_calls_leaves_the_result_unverified(make_harness: MakeHarness) -> None:
    @tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    shouted = plan(tool_step("1", "shout", {"text": "hi"}), goal="shout hi")
    h = make_harness([shouted], tools=[shout])
    result = h.run("shout hi")
    assert result["status"] == "completed"
    assert result["verification"]["verdict"] == "unverified"
    assert result["verification"]["reason"] == "shout cannot review its calls against the request"


def test_a_review_that_raises_proves_nothing(make_harness: MakeHarness) -> None:
    class Broken(CalculatorTool):
        def review(self, request: str, calls: Any) -> Review:
            raise RuntimeError("no idea")

    h = make_harness([calc_plan("5 + 10"), answer("5 + 10 is 15.")], tools=[Broken()])
    result = h.run("add 5 and 10")
    assert result["status"] == "completed"
    (review,) = checks_named(result, "review")
    assert review["verdict"] == "inconclusive" and "RuntimeError: no idea" in review["detail"]
    assert result["verification"]["verdict"] == "unverified"


def test_an_echo_of_text_the_request_does_not_hold_is_contradicted(make_harness: MakeHarness) -> None:
    h = make_harness([plan(tool_step("1", "echo", {"message": "the sky is blue"}), goal="repeat")])
    result = h.run("repeat back exactly: Aeon is small")
    assert result["status"] == "failed"
    assert result["verification"]["verdict"] == "contradicted"
    assert "'the sky is blue' is not text from the request" in result["verification"]["reason"]


def test_a_run_out_of_ttl_is_at_best_unverified(make_harness: MakeHarness) -> None:
    h = make_harness([plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))], ttl=2)
    result = h.run("add 5 and 10")
    assert result["status"] == "ttl_expired"
    assert result["verification"]["verdict"] == "unverified"
    assert result["verification"]["reason"].startswith("the run ended ttl_expired")


def test_a_verdict_survives_a_resume(tmp_path: Any) -> None:
    """The checks are part of the stored state: a run resumed in another engine reports those of its first part."""
    config = (
        AeonConfig()
        .with_choice("llm", "scripted", responses=[calc_plan("5 + 10"), answer("5 + 10 is 15.")])
        .with_choice("state", "sqlite", path=str(tmp_path / "runs.db"))
    )
    with Engine(config) as engine:
        run = engine.orchestrator().start("add 5 and 10")
        next(run)  # the plan: its check is committed with the cycle
        run.close()
    with Engine(config) as engine:
        result = engine.resume(run.run_id)
    names = [c["name"] for c in result["verification"]["checks"]]
    assert names[0] == "plan_fits_request" and "review" in names
    assert result["verification"]["verdict"] == "verified"


# --- the verdict's rules ---------------------------------------------------------------------------------------


def _check(verdict: Any, name: str = "x", by: str | None = None) -> Check:
    return Check(name=name, subject="run", verdict=verdict, by=by, detail=f"{name} said {verdict}")


CALL = ToolCall(tool_name="calculator", arguments={"expression": "1 + 1"}, result={"value": 2}, step_id="1")


@pytest.mark.parametrize(
    ("checks", "calls", "verdict"),
    [
        ([_check("passed", "review", "calculator")], [CALL], "verified"),
        ([_check("resolved", "review", "calculator")], [CALL], "verified"),
        ([_check("passed", "review", "calculator"), _check("failed")], [CALL], "contradicted"),
        ([_check("passed", "review", "calculator"), _check("inconclusive")], [CALL], "unverified"),
        ([_check("passed", "review", "calculator"), _check("skipped")], [CALL], "unverified"),
        ([_check("passed", "review", "echo")], [CALL], "unverified"),  # the calculator's calls: not reviewed
        ([_check("passed")], [], "unverified"),  # no tool: the model's own words
        ([], [CALL.model_copy(update={"error": {"message": "x"}, "result": None})], "unverified"),
    ],
)
def test_the_verdict_rules(checks: list[Check], calls: list[ToolCall], verdict: str) -> None:
    assert verify(checks, tool_calls=calls).verdict == verdict


def test_a_resolved_check_settles_the_doubts_of_its_kind_recorded_before_it_only() -> None:
    """A multi-pass run that replaced a flagged plan with the request's parts records ``resolved``: the doubt about
    the replaced plan is settled; a doubt recorded after it (a part's), or about something else, is not."""
    review = _check("passed", "review", "calculator")
    doubt, settled = _check("inconclusive", "plan_fits_request"), _check("resolved", "plan_fits_request")
    assert verify([doubt, settled, review], tool_calls=[CALL]).verdict == "verified"
    assert verify([settled, doubt, review], tool_calls=[CALL]).verdict == "unverified"
    assert verify([doubt, settled, doubt, review], tool_calls=[CALL]).verdict == "unverified"
    other = _check("inconclusive", "convergence")
    assert verify([other, settled, review], tool_calls=[CALL]).reason.startswith("convergence:")
    failed = _check("failed", "plan_fits_request")
    assert verify([failed, settled, review], tool_calls=[CALL]).verdict == "contradicted"


def test_a_contradiction_names_the_first_unresolved_finding() -> None:
    found = verify([_check("passed"), _check("failed", "review", "calculator"), _check("failed", "other")])
    assert found.reason == "review: review said failed"


def test_tools_review_nothing_by_default() -> None:
    assert Tool.review(EchoTool(), "x", []) is None  # the contract's default; the echo overrides it
    assert EchoTool().review("say hi", [{"arguments": {"message": "hi"}}]) == Review(approved=True)


def test_text_another_tool_takes_from_the_request_is_not_the_calculators_business(
    make_harness: MakeHarness,
) -> None:
    """Reviewed against the whole request, the calculator read the 1 of an echoed "alert(1)" as a number no
    calculation used."""
    steps = [
        tool_step("1", "calculator", {"expression": "5 + 10"}),
        tool_step("2", "echo", {"message": "<b>alert(1)</b>"}),
    ]
    h = make_harness([plan(*steps)])
    result = h.run("add 5 and 10, then echo <b>alert(1)</b>")
    assert result["status"] == "completed"
    assert result["verification"]["verdict"] == "verified", result["verification"]
