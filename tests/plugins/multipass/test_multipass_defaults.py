"""Multi-pass runs end to end on aeon-core's default components (model depth, semantic validator, judge, recursive
planner) with a scripted model: the phase order, the model calls, and record/replay of every one of them."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from aeon_kernel import Engine
from aeon_kernel.config import AeonConfig
from aeon_kernel.testing import RecordingSink
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS


def profile(depth: int, why: str) -> dict[str, Any]:
    return {
        "reasoning_depth": depth,
        "information": 8,
        "expected_tool_usage": "minimal",
        "output_breadth": "narrow",
        "confidence_requirement": "medium",
        "why": why,
    }


SUM_PLAN = {
    "goal": "Add 5 and 10",
    "steps": [
        {
            "step_id": "1",
            "description": "Add 5 and 10",
            "tool": "calculator",
            "arguments": {"expression": "5 + 10"},
        },
        {"step_id": "2", "description": "Report the sum", "agent": "llm"},
    ],
}


def engine(responses: list[Any], **options: Any) -> tuple[Engine, RecordingSink]:
    config = AeonConfig(ttl=30).with_choice("llm", "scripted", responses=responses).multipass()
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    built = Engine(config, plugins=builtins, autoload=False, **options)
    sink = RecordingSink()
    built.pm.register(sink, name="sink:recording")
    return built, sink


def phases(sink: RecordingSink) -> list[str]:
    return [e.phase for e in sink.entries]


def shallow(why: str, answer: str) -> list[Any]:
    """What the model answers in a shallow run: the profile, the plan, the report step."""
    return [profile(1, why), SUM_PLAN, json.dumps({"answer": answer})]


def deep(why: str, issue: str, answer: str, note: str) -> list[Any]:
    """A deep run: the profile, the plan, the plan's validation, the report step, the results' validation, the
    judge."""
    return [
        profile(4, why),
        SUM_PLAN,
        {
            "issues": [
                {
                    "type": "specificity",
                    "severity": "LOW",
                    "location": "2",
                    "description": issue,
                    "repair": "x",
                }
            ]
        },
        json.dumps({"answer": answer}),
        {"issues": []},
        {"coherence": 10, "consistency": 10, "note": note},
    ]


def test_a_shallow_task_costs_one_model_call_more_than_single_pass() -> None:
    built, sink = engine(shallow("a plain sum", "5 + 10 is 15."))
    with built:
        result = built.run("calculate the sum of 5 and 10")
    assert result["status"] == "completed", result["message"]
    assert result["answer"] == "5 + 10 is 15."
    assert phases(sink) == ["profile", "plan", "step", "step", "evaluate"]
    assert len(result["final_state"]["llm_outputs"]) == 3  # single-pass makes 2: the plan and the report
    plan = result["plan"]["steps"]
    assert [(s["step_index"], s["total_steps"]) for s in plan] == [(1, 2), (2, 2)]  # the recursive planner's


def test_a_deep_task_is_validated_and_judged_by_the_model() -> None:
    built, sink = engine(deep("several checks", "step 2 could say more", "5 + 10 is 15.", "states the sum"))
    with built:
        result = built.run("calculate the sum of 5 and 10")
    assert result["status"] == "completed", result["message"]
    assert phases(sink) == ["profile", "plan", "validate", "step", "step", "evaluate"]
    history = result["execution_history"]
    assert history["profile"]["reasoning_depth"] == 4
    assert history["passes"][0]["report"]["issues"][0]["description"] == "step 2 could say more"
    assert history["passes"][1]["assessment"]["coherence_score"] == 1.0


def test_the_phase_order_is_the_same_whatever_the_model_answers() -> None:
    orders = []
    for variant in (
        deep("several checks", "step 2 could say more", "5 + 10 is 15.", "states the sum"),
        deep("careful, two facts", "the report is vague", "The sum is 15", "answers the request"),
    ):
        built, sink = engine(variant)
        with built:
            assert built.run("calculate the sum of 5 and 10")["status"] == "completed"
        orders.append(phases(sink))
    assert orders[0] == orders[1]


def test_record_and_replay_cover_every_model_call_of_every_phase(tmp_path: Path) -> None:
    cassette = tmp_path / "multipass.jsonl"
    recorded, _ = engine(
        deep("several checks", "step 2 could say more", "5 + 10 is 15.", "states the sum"), record=cassette
    )
    with recorded:
        first = recorded.run("calculate the sum of 5 and 10")
    lines = cassette.read_text().splitlines()
    assert len(lines) == 1 + 6  # the header, then profile, plan, validation, report, validation, judge
    replayed, sink = engine([], replay=cassette)  # no responses: every answer comes from the cassette
    with replayed:
        second = replayed.run("calculate the sum of 5 and 10")
    assert second["status"] == first["status"] == "completed"
    assert second["answer"] == first["answer"]
    # What differs between two runs of the same answers: times, and ids that are random by design.
    strip = ("started", "ended", "duration_ms", "total_ms", "execution_id", "validation_id", "issue_id")

    def stable(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: stable(v) for k, v in value.items() if k not in strip}
        if isinstance(value, list):
            return [stable(v) for v in value]
        return value

    assert stable(second["execution_history"]) == stable(first["execution_history"])
    assert phases(sink) == ["profile", "plan", "validate", "step", "step", "evaluate"]
