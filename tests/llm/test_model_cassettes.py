"""The kernel on real model output: runs replayed from cassettes recorded from Gemma 3 270M (llama.cpp, constrained).

The cassettes and ``expected.json`` are written by ``python bench/local_model.py --only constrained --record
tests/cassettes``. Replay serves only recorded requests, so these tests also fail when a prompt changes without
re-recording (the error names the nearest recorded prompt and the diff). No model is loaded here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.schemas import schema_errors
from aeon_plugins.planning.grounding import numbers_in
from aeon_plugins.planning.prompts import plan_schema

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "tests" / "cassettes"
EXPECTED: dict[str, Any] = json.loads((CASSETTES / "expected.json").read_text(encoding="utf-8"))
sys.path.insert(0, str(ROOT / "bench"))
from local_model import CASES, states  # noqa: E402

BY_NAME = {case.name: case for case in CASES}


def replay(name: str) -> tuple[dict[str, Any], Engine]:
    engine = Engine(AeonConfig(), replay=CASSETTES / f"{name}.jsonl")
    return engine.orchestrator(ttl=12).execute(BY_NAME[name].request), engine


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_reproduces_the_recorded_run(name: str) -> None:
    result, _ = replay(name)
    tools = [[c["tool_name"], c["arguments"], c["result"]] for c in result["final_state"]["tool_history"]]
    assert {"status": result["status"], "answer": result["answer"], "tools": tools} == EXPECTED[name]


def parsed(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:  # a reply cut at the token limit
        return {}
    return value if isinstance(value, dict) else {}


def calls(plan: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [(s.get("tool"), s.get("arguments")) for s in plan.get("steps", [])]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_constrained_plans_are_schema_valid_at_the_first_attempt(name: str) -> None:
    result, engine = replay(name)
    outputs = result["final_state"]["llm_outputs"]
    tools = engine.tools.export_tools_for_llm()
    assert outputs[0]["constrained"] is True
    if outputs[0]["usage"]["completion_tokens"] >= AeonConfig().max_tokens:
        # a grammar cannot make the model finish within the token limit (missing_email: an echo message that
        # repeats itself): the plan is cut, so no plan runs from it and the run does not end completed
        assert result["status"] != "completed" and not result["final_state"]["tool_history"]
        return
    written = json.loads(outputs[0]["text"])
    assert schema_errors(plan_schema(tools), written) == []
    # no repair touched the plan that ran (a later answer may still need one): it is the model's first plan, or,
    # when the plan check asked again (its findings recorded as the original's errors), the model's second one
    checks = [a for a in result["final_state"]["supervisor_actions"] if a["action_type"] == "plan_repair"]
    assert all(a["original_output"].get("errors") for a in checks)
    if checks and (repaired := checks[0]["repaired_output"]) is not None:
        # the plan asked for again that passed: the second output, or a later one written from other examples
        (written,) = [w for o in outputs[1:4] if calls(w := parsed(o["text"])) == calls(repaired)][:1]
        assert all(o["constrained"] for o in outputs[1:4])
        assert schema_errors(plan_schema(tools, goal=BY_NAME[name].request), written) == []
    ran = [(s["step_id"], s.get("tool"), s.get("arguments")) for s in result["final_state"]["plan"]["steps"]]
    wrote = [(s["step_id"], s.get("tool"), s.get("arguments")) for s in written["steps"]]
    # ... except the calls the planner left out: to a tool the request asks nothing of (the model answers instead)
    left_out = [c for c in result["verification"]["checks"] if "were left out" in (c["detail"] or "")]
    if left_out:
        wrote = [
            w if (w[1], w[2]) == (r[1], r[2]) or r[1] is not None else r
            for w, r in zip(wrote, ran, strict=True)
        ]
        assert left_out[0]["name"] == "plan_fits_request" and left_out[0]["verdict"] == "resolved"
    assert ran == wrote


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("repeat", {"message": "the text is small"}, {"message": "Aeon is small"}),  # not the request's text
        (
            "words_minus",
            {"expression": "133 - 100"},
            {"expression": "100 - 33"},
        ),  # 133 is no number it states
        (
            "decimals",
            {"expression": "1.5 * 2 + 2.25"},
            {"expression": "1.5 + 2.25"},
        ),  # 2 is no number it states
    ],
)
def test_the_plan_check_replaces_a_plan_the_model_did_not_write_for_the_request(
    name: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    result, _ = replay(name)
    (check,) = [a for a in result["final_state"]["supervisor_actions"] if a["action_type"] == "plan_repair"]
    assert check["original_output"]["steps"][0]["arguments"] == first and check["original_output"]["errors"]
    assert check["repaired_output"]["steps"][0]["arguments"] == second
    assert check["repaired_output"]["goal"] == BY_NAME[name].request  # the second plan's goal: the request
    assert result["final_state"]["tool_history"][0]["arguments"] == second
    answer = result["answer"] if isinstance(result["answer"], str) else json.dumps(result["answer"])
    assert states(answer, str(BY_NAME[name].expect))  # the right value, as the answer's last number


def test_a_plan_that_repeats_a_number_rightly_costs_one_call_and_runs_as_written() -> None:
    result, _ = replay("cube")  # "what is 3 cubed?": 3 ^ 3 uses 3 twice, and is right
    (check,) = [a for a in result["final_state"]["supervisor_actions"] if a["action_type"] == "plan_repair"]
    assert check["original_output"]["errors"] == ["The plan uses 3 more often than the request states it."]
    assert check["repaired_output"] is None and check["error"]["message"].endswith("The first plan is kept.")
    assert result["final_state"]["tool_history"][0]["arguments"] == {"expression": "3 ^ 3"}
    assert result["answer"] == "3 cubed is 27."


def test_sum_of_5_and_10_calls_the_calculator_and_reports_15() -> None:
    result, _ = replay("sum")
    assert result["status"] == "completed"
    first = result["final_state"]["tool_history"][0]
    assert (first["tool_name"], first["arguments"], first["result"]["value"]) == (
        "calculator",
        {"expression": "5 + 10"},
        15,
    )
    assert numbers_in(str(result["answer"]))[-1][1] == 15  # the answer ends on the calculator's value


def test_a_request_for_a_missing_tool_ends_structured_without_inventing_a_tool() -> None:
    result, engine = replay("missing_tool")
    assert result["status"] in {"completed", "failed"}
    assert {c["tool_name"] for c in result["final_state"]["tool_history"]} <= set(engine.tools.list_all())


def test_the_usage_of_every_model_call_is_logged() -> None:
    result, _ = replay("two_steps")
    for output in result["final_state"]["llm_outputs"]:
        assert output["usage"]["prompt_tokens"] > 0 and output["usage"]["completion_tokens"] > 0
