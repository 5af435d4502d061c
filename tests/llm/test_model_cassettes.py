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
from aeon_kernel.llm.prompts import plan_schema
from aeon_kernel.plan.grounding import numbers_in
from aeon_kernel.schemas import schema_errors

ROOT = Path(__file__).resolve().parents[2]
CASSETTES = ROOT / "tests" / "cassettes"
EXPECTED: dict[str, Any] = json.loads((CASSETTES / "expected.json").read_text(encoding="utf-8"))
sys.path.insert(0, str(ROOT / "bench"))
from local_model import CASES  # noqa: E402

BY_NAME = {case.name: case for case in CASES}


def replay(name: str) -> tuple[dict[str, Any], Engine]:
    engine = Engine(AeonConfig(), replay=CASSETTES / f"{name}.jsonl")
    return engine.orchestrator(ttl=12).execute(BY_NAME[name].request), engine


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_replay_reproduces_the_recorded_run(name: str) -> None:
    result, _ = replay(name)
    tools = [[c["tool_name"], c["arguments"], c["result"]] for c in result["final_state"]["tool_history"]]
    assert {"status": result["status"], "answer": result["answer"], "tools": tools} == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_constrained_plans_are_schema_valid_at_the_first_attempt(name: str) -> None:
    result, engine = replay(name)
    first = result["final_state"]["llm_outputs"][0]
    assert first["constrained"] is True
    schema = plan_schema(engine.tools.export_tools_for_llm())
    written = json.loads(first["text"])
    assert schema_errors(schema, written) == []
    # the plan that ran is the one the model wrote: no repair touched it (a later answer may still need one)
    ran = [(s["step_id"], s.get("tool"), s.get("arguments")) for s in result["final_state"]["plan"]["steps"]]
    assert ran == [(s["step_id"], s.get("tool"), s.get("arguments")) for s in written["steps"]]
    assert not [a for a in result["final_state"]["supervisor_actions"] if a["action_type"] == "plan_repair"]


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
