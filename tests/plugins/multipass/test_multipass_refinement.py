"""What multi-pass does that one pass cannot, on aeon-core's default components with a scripted model: a request
whose parts one plan lost is planned part by part; a semantic issue found without a model drives a refinement;
limits hold; an easy task stays cheap; a model that answers nonsense ends in a structured result."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from aeon_cli.live import pass_line
from aeon_kernel import Engine, hookimpl
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing import RecordingSink
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.recursive_planner import ModelRecursivePlanner
from aeon_plugins.scripted import ScriptedLLM
from tests.support.builders import answer, llm_step, plan, tool_step
from tests.support.live import live_view_of


def profile(depth: int = 1) -> dict[str, Any]:
    """A shallow profile, as Gemma 3 270M writes for nearly every request (a TTL of 17 cycles)."""
    return {
        "reasoning_depth": depth,
        "information": 1,
        "expected_tool_usage": "moderate",
        "output_breadth": "moderate",
        "confidence_requirement": "medium",
        "why": "one calculation",
    }


def calc_step(step_id: str, description: str, expression: str) -> dict[str, Any]:
    return tool_step(step_id, "calculator", {"expression": expression}, description=description)


def calc_plan(goal: str, expression: str, report: bool = True) -> dict[str, Any]:
    report_step = [llm_step("2", "Report the result")] if report else []
    return plan(calc_step("1", goal, expression), *report_step, goal=goal)


class Events:
    """Every aeon_pass_event, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, dict[str, Any]]] = []

    @hookimpl
    def aeon_pass_event(self, run_id: str, pass_number: int, event: str, record: dict[str, Any]) -> None:
        self.seen.append((pass_number, event, record))

    def named(self, name: str) -> list[dict[str, Any]]:
        return [record for _, event, record in self.seen if event == name]


def engine(
    responses: list[Any], *, multipass: bool = True, state_db: Path | None = None, **reasoning: Any
) -> tuple[Engine, RecordingSink, Events]:
    config = AeonConfig(ttl=40).with_choice("llm", "scripted", responses=responses)
    if multipass:
        config = config.multipass(**reasoning)
    if state_db is not None:
        config = config.with_choice("state", "sqlite", path=str(state_db))
    plugins = [importlib.import_module(name) for name in (*BUILTIN_PLUGINS, "aeon_plugins.sqlite_state")]
    built = Engine(config, plugins=plugins, autoload=False)
    sink, events = RecordingSink(), Events()
    built.pm.register(sink, name="sink:recording")
    built.pm.register(events, name="events")
    return built, sink, events


def phases(sink: RecordingSink) -> list[str]:
    return [e.phase if e.phase != "step" else f"step:{e.step_id}" for e in sink.entries]


def model_calls(sink: RecordingSink) -> int:
    return sum(e.usage.get("llm_calls", 0) for e in sink.entries)


def prompts(built: Engine) -> list[str]:
    adapter = built.llm.adapter
    assert isinstance(adapter, ScriptedLLM)
    return [p["prompt"] for p in adapter.prompts]


# --- decomposition ------------------------------------------------------------------------------------------------

CHAIN = "subtract 5 from 20, then divide the result by 3"
#: what the scripted model answers for CHAIN: the first plan drops the division (as Gemma 3 270M does)
CHAIN_SCRIPT = [
    profile(),
    calc_plan("Subtract 5 from 20", "20 - 5"),
    answer("20 - 5 is 15."),
    # pass 1 is not converged (3 was never used): the request's two parts, one at a time
    calc_plan("Subtract 5 from 20", "20 - 5"),  # part 1's subplan (its report step is left out)
    calc_plan("Divide 15 by 3", "15 / 3"),  # part 2's subplan, written knowing part 1's result
    answer("15 / 3 is 5."),
]


def test_a_chain_one_plan_lost_is_planned_part_by_part(monkeypatch: pytest.MonkeyPatch) -> None:
    asked_for: list[tuple[Any, ...]] = []
    original = ModelRecursivePlanner.create_subplan

    def spy(self: ModelRecursivePlanner, *args: Any, **kwargs: Any) -> Any:
        asked_for.append((*args, kwargs["tool_registry"] is not None))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ModelRecursivePlanner, "create_subplan", spy)
    built, sink, events = engine(CHAIN_SCRIPT)
    with built:
        result = built.run(CHAIN)
        asked = prompts(built)
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == [
        "profile",
        "plan",
        "step:1",
        "step:2",
        "evaluate",  # the structural check: 3 was not used
        "refine",  # the kernel adds the part steps (no model call)
        "update_profile",  # phase D: the task was under-profiled (no model call), a longer TTL
        "refine",  # part 1's subplan replaces it
        "step:part1.1",
        "refine",  # part 2's subplan, with part 1's result
        "step:part2.1",
        "step:part2.2",
        "evaluate",  # converged
    ]
    # the kernel drove the contract: (parent id, the part with its context, depth, max depth), with the tools
    assert asked_for == [
        ("part1", "subtract 5 from 20", 1, 5, True),
        ("part2", "divide 15 by 3", 1, 5, True),
    ]
    # part 2 was planned with part 1's result, by the kernel planner's prompt
    assert asked[3].endswith("Request: subtract 5 from 20\nPlan:")
    assert asked[4].endswith("Request: divide 15 by 3\nPlan:")
    steps = result["plan"]["steps"]
    assert [s["step_id"] for s in steps] == ["1", "2", "part1.1", "part2.1", "part2.2"]
    assert steps[3]["result"] == {"expression": "15 / 3", "value": 5}
    assert result["answer"] == "15 / 3 is 5."
    # complete steps of pass 1 were never touched
    assert (
        steps[0]["result"] == {"expression": "20 - 5", "value": 15} and steps[1]["result"] == "20 - 5 is 15."
    )
    history = result["execution_history"]
    first, second = history["passes"][1], history["passes"][2]
    assert first["assessment"]["reason_codes"] == ["semantic_issues"]
    assert "the request states 3, which no tool call used" in first["report"]["issues"][0]["description"]
    # the deltas: two ADDs (the parts) in pass 1, two REPLACEs (their subplans) in pass 2
    assert [(a["action_type"], a["target_step_id"]) for a in first["refinements"]] == [
        ("ADD", "2"),
        ("ADD", "part1"),
    ]
    assert [(a["action_type"], a["target_step_id"]) for a in second["refinements"]] == [
        ("REPLACE", "part1"),
        ("REPLACE", "part2"),
    ]
    assert second["assessment"]["converged"] and history["total_refinements"] == 4
    # every new step of the process is a pass event
    (decomposition,) = events.named("decomposition")
    assert [p["text"] for p in decomposition["parts"]] == ["subtract 5 from 20", "divide the result by 3"]
    subplans = events.named("subplan")
    assert [(s["part"], s["context"], s["applied"]) for s in subplans] == [
        ("part1", None, True),
        ("part2", "15", True),
    ]
    assert subplans[0]["left_out"] == ["part1.2"]  # part 1's report: the next part reads its tool's result
    assert model_calls(sink) == len(CHAIN_SCRIPT)
    # the first plan's doubt is settled by the parts that replaced it: each part's plan passed, and so did the
    # calculator's review of every call against the whole request
    verification = result["verification"]
    plan_checks = [c["verdict"] for c in verification["checks"] if c["name"] == "plan_fits_request"]
    assert plan_checks == ["inconclusive", "resolved", "passed", "passed"]
    assert verification["verdict"] == "verified", verification["reason"]


NESTED = "Take away 4 from the product of 9 and 3"
#: what the scripted model answers for NESTED up to part 2's subplan: the first plan drops the 4; no connective
#: to cut at, so the planner proposes parts; part 1's subplan
NESTED_OPENING = [
    profile(),
    calc_plan("Multiply 9 and 3", "9 * 3"),
    answer("9 * 3 is 27."),
    {"parts": ["multiply 9 and 3", "subtract 4 from the result"]},
    calc_plan("Multiply 9 and 3", "9 * 3"),
]


def test_a_request_without_connectives_is_split_by_the_planner_when_its_numbers_bear_the_split_out() -> None:
    script = [*NESTED_OPENING, calc_plan("Subtract 4 from 27", "27 - 4"), answer("27 - 4 is 23.")]
    built, sink, events = engine(script)
    with built:
        result = built.run(NESTED)
        asked = prompts(built)
    assert result["status"] == "completed", result["message"]
    assert asked[3].endswith(f"Request: {NESTED}\nParts:")
    assert asked[5].endswith("Request: subtract 4 from 27\nPlan:")
    (decomposition,) = events.named("decomposition")
    assert [p["text"] for p in decomposition["parts"]] == ["multiply 9 and 3", "subtract 4 from the result"]
    assert result["answer"] == "27 - 4 is 23." and model_calls(sink) == len(script)


def test_a_parts_step_that_ran_but_does_not_do_what_the_part_asks_is_blocked_and_refined() -> None:
    """Issue 26: a step wrong although it ran. Part 2's call adds where the part says subtract: its tool's review
    against the part blocks it (``invalid``), and the refinement's MODIFY runs it again under its id."""
    modify = {
        "actions": [
            {
                "action_type": "MODIFY",
                "target": "part2.1",
                "reason": "subtract, not add",
                "step": {"description": "Subtract 4 from 27", "uses": "calculator"},
            }
        ]
    }
    script = [
        *NESTED_OPENING,
        calc_plan("Subtract 4 from 27", "27 + 4"),  # part 2's subplan: the wrong operation
        modify,  # refine_plan, told the step is blocked and why
        {"expression": "27 - 4"},  # the modified step's arguments
        answer("27 - 4 is 23."),
    ]
    built, _, _ = engine(script)
    with built:
        result = built.run(NESTED)
        asked = prompts(built)
    assert result["status"] == "completed", result["message"]
    blocked = "part2.1: the step is blocked: its calls do not do what part2 asks: The request asks for 27 - 4"
    assert blocked in asked[6]
    step = next(s for s in result["plan"]["steps"] if s["step_id"] == "part2.1")
    assert step["status"] == "complete" and step["result"]["value"] == 23
    calls = [c["arguments"]["expression"] for c in result["final_state"]["tool_history"]]
    assert calls == ["9 * 3", "9 * 3", "27 + 4", "27 - 4"]  # the blocked call ran, and is on record
    assert result["answer"] == "27 - 4 is 23."


def test_propose_parts_gives_the_request_back_when_the_model_gives_no_parts() -> None:
    built, _, _ = engine([{"parts": ["a", "b"]}, "no parts", "still none", "none"])
    with built:
        planner = built.planner
        assert isinstance(planner, ModelRecursivePlanner)
        assert planner.propose_parts(NESTED) == ["a", "b"]  # as written: the scheduler checks them
        assert planner.propose_parts(NESTED) == [NESTED]
        adapter = built.llm.adapter
        assert isinstance(adapter, ScriptedLLM)
        assert adapter.prompts[0]["prompt"].endswith(f"Request: {NESTED}\nParts:")


def test_a_failed_step_is_superseded_by_the_parts_that_redo_the_request() -> None:
    """The first plan's only tool call fails: the step is blocked (``invalid``), so the pass is judged at once,
    before the report step after it runs; the parts redo the request, the blocked step, which they leave in place,
    fails, and the run converges on the parts."""
    script = [
        profile(),
        calc_plan("Compute (20 - 5) / 3", "(20 - 5) / 3 / 0"),
        answer("The calculation failed."),
        calc_plan("Subtract 5 from 20", "20 - 5"),
        calc_plan("Divide 15 by 3", "15 / 3"),
        answer("15 / 3 is 5."),
    ]
    built, sink, events = engine(script)
    with built:
        result = built.run(CHAIN)
    assert result["status"] == "completed", result["message"]
    assert result["message"].startswith("every step of the request's parts completed (steps ['1'] of the")
    assert phases(sink)[:6] == ["profile", "plan", "step:1", "evaluate", "refine", "update_profile"]
    history = result["execution_history"]
    # the configured (model) engine judged the shallow pass structurally: step 1 blocked, step 2 not yet run
    assessment = history["passes"][1]["assessment"]
    assert assessment["reason_codes"] == [
        "steps_unfinished",
        "step_invalid:1",
        "completeness_below_threshold",
    ]
    assert assessment["metadata"]["judge"] == "skipped: the plan is unfinished"
    assert assessment["coherence_score"] is None  # not measured
    first = result["plan"]["steps"][0]
    assert (first["step_id"], first["status"], first["clarity_state"]) == ("1", "failed", "BLOCKED")
    assert first["failure"].endswith("(no refinement replaced it)")
    assert len(events.named("decomposition")) == 1
    assert history["passes"][2]["assessment"]["converged"] and result["answer"] == "15 / 3 is 5."


FOUR_PARTS = "add 2 and 3, then multiply the result by 4, then subtract 6, then divide the result by 7"


@pytest.mark.parametrize(("depth", "ttls"), [(1, [17, 20]), (2, [20, 23])])
def test_a_decomposed_task_is_profiled_deeper_and_gets_the_cycles_its_parts_need(
    depth: int, ttls: list[int]
) -> None:
    """Four parts, one of them planned in two tool steps: 19 cycles, more than the 17 of a depth-1 profile.
    Phase D deepens the profile after the decomposition, and the formula's TTL for the next depth pays for them;
    the task is still judged as the shallow one it was planned as (no model judge, even at depth 3)."""
    first = calc_plan("Add 2 and 3", "2 + 3")
    first["steps"].insert(1, calc_step("3", "Times 4", "5 * 4"))
    two_steps = calc_plan("Multiply 5 by 4", "5 * 4", report=False)
    two_steps["steps"].append(calc_step("2", "Show it", "20"))
    script = [
        profile(depth),
        first,
        answer("20."),
        calc_plan("Add 2 and 3", "2 + 3"),
        two_steps,
        calc_plan("Subtract 6 from 20", "20 - 6"),
        calc_plan("Divide 14 by 7", "14 / 7"),
        answer("14 / 7 is 2."),
    ]
    built, sink, events = engine(script)
    with built:
        result = built.run(FOUR_PARTS)
        asked = prompts(built)
    assert result["status"] == "completed", result["message"]
    assert result["final_state"]["cycle"] == 19 and result["answer"] == "14 / 7 is 2."
    assert phases(sink)[6:8] == ["refine", "update_profile"]  # the parts added, then phase D
    (update,) = events.named("profile_update")
    assert update["reasoning_depth"] == depth + 1
    assert update["raw_inference"].startswith("update (deeper): 1 HIGH")
    assert [t["allocated"] for t in events.named("ttl")] == ttls
    assert "validate" not in phases(sink) and len(asked) == model_calls(sink) == len(script)  # no model judge


def test_the_live_view_shows_the_parts_and_their_subplans() -> None:
    """What `aeon run --multipass` prints of a decomposition: the parts, then each part's subplan as it is made."""
    result, shown = live_view_of(engine(CHAIN_SCRIPT)[0], CHAIN)
    assert result["status"] == "completed"
    for text in (
        "pass 1 decomposed into 2 parts: part1: subtract 5 from 20 | part2: divide the result by 3",
        'pass 2 part1 planned: calculator {"expression": "20 - 5"}',
        'pass 2 part2 planned (given the result 15): calculator {"expression": "15 / 3"}; Report the result',
    ):
        assert text in shown, shown


def test_the_live_view_says_why_a_part_runs_without_a_subplan() -> None:
    refused = {
        "part": "part3",
        "applied": False,
        "refused": "part3 reached the 3 refinements a fragment may have",
    }
    failed = {"part": "part2", "applied": False, "error": "LLMError: the model is unavailable"}
    assert str(pass_line("subplan", refused)) == (
        "part3: no subplan, runs as it is (part3 reached the 3 refinements a fragment may have)"
    )
    assert (
        str(pass_line("subplan", failed))
        == "part2: no subplan, runs as it is (LLMError: the model is unavailable)"
    )


def test_decomposition_happens_once_and_only_for_a_lost_part() -> None:
    """A chain whose first plan did all of it converges on pass 1: no decomposition, one call more than
    single-pass."""
    script = [profile(), calc_plan("Compute (20 - 5) / 3", "(20 - 5) / 3"), answer("(20 - 5) / 3 is 5.")]
    built, sink, events = engine(script)
    with built:
        result = built.run(CHAIN)
    assert result["status"] == "completed", result["message"]
    assert events.named("decomposition") == [] and phases(sink)[-1] == "evaluate"
    assert model_calls(sink) == 3


def test_a_decomposed_run_resumes_between_its_parts(tmp_path: Path) -> None:
    """The parts and their state live in the run's state: a resumed run asks only for what is left."""
    db = tmp_path / "runs.db"
    first, sink, _ = engine(CHAIN_SCRIPT[:4], state_db=db)
    with first:
        run = first.start(CHAIN)
        for _ in range(9):  # profile .. part 1's step
            run.next()
        run.close()
    assert phases(sink)[-1] == "step:part1.1"
    second, sink, _ = engine(CHAIN_SCRIPT[4:], state_db=db)
    with second:
        result = second.resume(run.run_id)
        asked = prompts(second)
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == ["refine", "step:part2.1", "step:part2.2", "evaluate"]
    assert asked[0].endswith("Request: divide 15 by 3\nPlan:")


# --- the semantic check and the refinement it drives --------------------------------------------------------------

BRACKETS = "compute (3 + 4) * 5"
ADD_STEP = {
    "actions": [
        {
            "action_type": "ADD",
            "target": "end",
            "reason": "use the 5",
            "step": {"description": "Multiply the result by 5", "uses": "calculator"},
        }
    ]
}


def test_a_number_no_tool_used_is_an_issue_whose_text_drives_the_refinement() -> None:
    script = [
        profile(),
        calc_plan("Add 3 and 4", "3 + 4"),
        answer("3 + 4 is 7."),
        {"parts": ["add 3 and 4", "report it"]},  # propose_parts: drops the 5, so not kept
        ADD_STEP,  # refine_plan, asked with the issue
        {"expression": "7 * 5"},  # the new step's arguments, from the results so far
    ]
    built, sink, _ = engine(script)
    with built:
        result = built.run(BRACKETS)
        asked = prompts(built)
    assert result["status"] == "completed", result["message"]
    new_id = result["plan"]["steps"][2]["step_id"]
    assert phases(sink) == [
        "profile",
        "plan",
        "step:1",
        "step:2",
        "evaluate",
        "refine",
        f"step:{new_id}",
        "evaluate",
    ]
    history = result["execution_history"]
    issue = history["passes"][1]["report"]["issues"][0]
    assert (issue["type"], issue["severity"], issue["location"]) == ("consistency", "HIGH", "request")
    assert issue["description"].startswith("the request states 5, which no tool call used")
    assert issue["proposed_repair"] == "add a step that does the part of the request with 5"
    # no connective: the planner was asked for parts first, and the split it proposed was not kept
    assert asked[3].endswith(f"Request: {BRACKETS}\nParts:")
    # the refinement prompt carries the issue's text; the delta it drove was applied by the kernel
    assert f"request: consistency: {issue['description']}" in asked[4]
    assert "plan: semantic_issues" in asked[4]
    (added,) = history["passes"][1]["refinements"]
    assert added["action_type"] == "ADD" and added["target_plan_section"] == "end"
    assert result["answer"] == {"expression": "7 * 5", "value": 35}
    assert history["passes"][2]["assessment"]["converged"] and history["passes"][2].get("report") is None


def test_a_percentage_may_be_used_as_a_share_and_the_calculators_review_reads_words() -> None:
    """The semantic check's own rule reads numbers in digits: 20% used as 0.2 is used. It then asks the calculator
    to review the calls (issue 26), which reads numbers in words too: "two" is unused, so the pass does not
    converge, nothing is left to change, and the run ends failed, its answer kept and contradicted."""
    script = [profile(), calc_plan("Take 20 percent of 150", "150 * 0.2"), answer("It is 30.")]
    built, _, _ = engine(script)
    with built:
        result = built.run("what is 20% of 150, in two words?")
    history = result["execution_history"]
    finding = "The request states 2, which no calculation uses."
    (issue,) = history["passes"][1]["report"]["issues"]
    assert (issue["severity"], issue["description"]) == ("HIGH", f"calculator's review: {finding}")
    assert not history["converged"] and result["status"] == "failed" and result["answer"] == "It is 30."
    assert result["verification"]["verdict"] == "contradicted"
    (review,) = [c for c in result["verification"]["checks"] if c["name"] == "review"]
    assert (review["verdict"], review["detail"], review["by"]) == ("failed", finding, "calculator")


# --- limits -------------------------------------------------------------------------------------------------------


def test_decomposition_stays_within_the_refinement_limit() -> None:
    """max_refinements = 2: the two part steps are added (the third part is refused), and their subplans, which
    the limit would refuse, are not even asked for: each part runs as the model's own answer."""
    request = "add 1 and 2, then double the result, then add 4 to it"
    script = [
        profile(),
        calc_plan("Add 1 and 2", "1 + 2"),
        answer("1 + 2 is 3."),
        answer("1 + 2 is 3."),  # part 1, answered by the model (no subplan)
        answer("3 doubled is 6."),  # part 2 (nothing grounds 6: asked twice, then the tool's result stands)
        answer("3 doubled is 6."),
        {"actions": []},  # 4 is still unused: refine_plan proposes nothing, and the run ends
    ]
    built, sink, events = engine(script, max_refinements=2)
    with built:
        result = built.run(request)
    history = result["execution_history"]
    refine = next(e for e in sink.entries if e.phase == "refine")
    assert "the run has used all 2 refinements" in refine.errors[0]["message"]
    assert [(a["action_type"], a["new_step"]["step_id"]) for a in history["passes"][1]["refinements"]] == [
        ("ADD", "part1"),
        ("ADD", "part2"),
    ]
    subplans = events.named("subplan")
    assert [(s["part"], s["applied"]) for s in subplans] == [("part1", False), ("part2", False)]
    # (the refused ADD of part 3 went after part 2: that fragment is marked for manual intervention)
    assert [s["refused"] for s in subplans] == [
        "the run has used all 2 refinements",
        "part2 is marked for manual intervention",
    ]
    # no subplan cycle, no create_subplan call
    assert phases(sink) == [
        "profile",
        "plan",
        "step:1",
        "step:2",
        "evaluate",
        "refine",
        "update_profile",
        "step:part1",
        "step:part2",
        "evaluate",
        "refine",
    ]
    assert history["total_refinements"] == 2 and model_calls(sink) == len(script)
    assert result["status"] == "failed" and result["answer"] is not None


def test_a_subplan_past_the_nesting_limit_marks_the_part_for_manual_intervention() -> None:
    script = [
        profile(),
        calc_plan("Subtract 5 from 20", "20 - 5"),
        answer("20 - 5 is 15."),
        answer("20 - 5 is 15."),  # part 1 runs as it is: its subplan would nest 2 deep
        answer("15 / 3 is 5."),  # part 2 likewise
        {"actions": []},  # 3 is still unused; refine_plan has nothing: the run ends
    ]
    built, sink, events = engine(script, max_depth=1)
    with built:
        result = built.run(CHAIN)
    errors = [e for entry in sink.entries if entry.phase == "refine" for e in entry.errors]
    assert any(e["type"] == "NestingDepthError" for e in errors)
    assert [(s["step_id"], s["subplan"]) for s in built_parts(result)] == [
        ("part1", "unplanned"),
        ("part2", "unplanned"),
    ]
    subplans = events.named("subplan")  # create_subplan refused before any model call
    assert [(s["part"], s["applied"]) for s in subplans] == [("part1", False), ("part2", False)]
    assert all(s["error"].startswith("NestingDepthError") for s in subplans)
    manual = result["final_state"]["scheduler_state"]["multipass"]["ledger"]["manual"]
    assert manual == ["part1", "part2"]
    assert model_calls(sink) == len(script) and result["status"] == "failed"
    assert result["answer"] == "15 / 3 is 5."


def built_parts(result: dict[str, Any]) -> list[dict[str, Any]]:
    return list(result["final_state"]["scheduler_state"]["multipass"]["parts"])


# --- adaptive depth: an easy task stays cheap ------------------------------------------------------------------------


def test_a_simple_task_costs_exactly_one_model_call_more_than_single_pass() -> None:
    """The structural check that could have sent it to a second pass costs no model call."""
    counts = {}
    for multipass in (False, True):
        script = [calc_plan("Multiply 12 by 7", "12 * 7"), answer("12 times 7 is 84.")]
        built, sink, _ = engine([profile(), *script] if multipass else script, multipass=multipass)
        with built:
            result = built.run("what is 12 times 7?")
        assert result["status"] == "completed", result["message"]
        counts[multipass] = model_calls(sink)
    assert counts == {False: 2, True: 3}


# --- malformed model output -----------------------------------------------------------------------------------------


def test_a_subplan_the_model_garbles_leaves_the_part_to_run_as_it_is() -> None:
    script = [
        profile(),
        calc_plan("Subtract 5 from 20", "20 - 5"),
        answer("20 - 5 is 15."),
        "not json",  # part 1's subplan: garbage, and the supervisor's two repairs too
        "{{{",
        "still not",
        answer("20 - 5 is 15."),  # part 1, answered by the model
        calc_plan("Divide 15 by 3", "15 / 3"),
        answer("15 / 3 is 5."),
    ]
    built, _, _ = engine(script)
    with built:
        result = built.run(CHAIN)
    assert result["status"] == "completed", result["message"]
    parts = built_parts(result)
    assert parts[0]["subplan"] == "unplanned" and "SupervisorError" in parts[0]["error"]
    # part 1 called no tool: its answer is the context; a text, so part 2's call is not reviewed against it (its
    # numbers 20 and 5 are not part 2's)
    assert parts[1]["subplan"] == "planned" and parts[1]["context"] == "20 - 5 is 15."
    assert result["answer"] == "15 / 3 is 5."


def test_a_refinement_the_model_garbles_ends_failed_with_the_reasons() -> None:
    script = [profile(), calc_plan("Add 3 and 4", "3 + 4"), answer("3 + 4 is 7."), "garbage", "{", "]"]
    built, sink, _ = engine(script)
    with built:
        result = built.run(BRACKETS)
    assert result["status"] == "failed"
    assert "semantic_issues" in result["message"]
    assert result["answer"] == "3 + 4 is 7."
    assert result["convergence"]["reason_codes"] == ["semantic_issues"]
    assert result["execution_history"]["passes"][-1]["refinements"] == []
    assert phases(sink)[-2:] == ["evaluate", "refine"]


# --- clarity --------------------------------------------------------------------------------------------------------


def test_each_step_records_its_clarity() -> None:
    two_calls = plan(
        calc_step("1", "Add 5 and 10", "5 + 10"),
        llm_step("2", "Report the sum"),
        calc_step("3", "Divide by zero", "1 / 0"),
        goal="add, report and divide",
    )
    # the report states 99 twice: nothing grounds it, so the kernel answers with the tool's result
    script = [profile(), two_calls, answer("It is 99."), answer("It is 99."), {"actions": []}]
    built, _, _ = engine(script)
    with built:
        result = built.run("add 5 and 10 with a division of 1 by 0")
    clarity = {s["step_id"]: s.get("clarity_state") for s in result["plan"]["steps"]}
    assert clarity == {"1": "CLEAR", "2": "PARTIALLY_CLEAR", "3": "BLOCKED"}
    # blocked, then failed: the refinement changed nothing
    assert result["plan"]["steps"][2]["status"] == "failed" and result["status"] == "failed"
