"""The kernel loop end to end, on real built-in components with the scripted model (spec 000 FR-001…055)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aeon_kernel import (
    FunctionTool,
    LLMAdapter,
    LLMResponse,
    LLMTransientError,
    OrchestrationError,
    Plan,
    StepStatus,
    ValidationError,
)
from aeon_plugins.echo import EchoTool
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step

SUM_PLAN = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))


def test_sc009_plan_tool_thought(make_harness: MakeHarness) -> None:
    """SC-009: plan generation, a tool call with its result, and a thought that uses the result."""
    h = make_harness([SUM_PLAN, answer("The sum is 15")])
    result = h.run()

    assert result["status"] == "completed"
    assert result["answer"] == "The sum is 15"
    state = h.orchestrator.get_state()
    assert [c.result for c in state.tool_history] == [{"expression": "5 + 10", "value": 15}]
    assert [s.status for s in state.plan.steps] == [StepStatus.COMPLETE, StepStatus.COMPLETE]
    # FR-002/FR-018: the tool result, read back from memory, is in the prompt of the next LLM cycle.
    assert '"value": 15' in h.llm.prompts[1]["prompt"]
    assert h.memory.read(f"run/{state.run_id}/1") == {"expression": "5 + 10", "value": 15}
    assert h.memory.read(f"run/{state.run_id}/2") == "The sum is 15"
    # One log record per cycle, numbered from 1, TTL spent once per cycle (FR-035).
    assert [(e.step_number, e.phase, e.step_id) for e in h.entries] == [
        (1, "plan", None),
        (2, "step", "1"),
        (3, "step", "2"),
    ]
    assert [e.ttl_remaining for e in h.entries] == [19, 18, 17]
    assert h.entries[1].tool_calls[0].result == {"expression": "5 + 10", "value": 15}
    assert result["final_state"]["ttl_remaining"] == 17
    assert len(state.llm_outputs) == 2


def test_remaining_ttl_is_passed_to_the_model(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15")], ttl=7)
    h.run()
    assert "Cycles left: 5" in h.llm.prompts[1]["prompt"]


def test_steps_run_strictly_in_order(make_harness: MakeHarness) -> None:
    """FR-052: step N is complete or failed before step N+1 starts."""
    steps = [tool_step(str(i), "echo", {"message": f"m{i}"}) for i in range(1, 6)]
    h = make_harness([plan(*steps)])
    assert h.run("echo m1 m2 m3 m4 m5")["status"] == "completed"
    changes = h.sink.of("aeon_step_status_changed")
    expected = []
    for i in range(1, 6):
        expected += [
            (str(i), StepStatus.PENDING, StepStatus.RUNNING),
            (str(i), StepStatus.RUNNING, StepStatus.COMPLETE),
        ]
    assert changes == expected


def test_tool_arguments_come_from_the_model_when_the_plan_has_none(make_harness: MakeHarness) -> None:
    h = make_harness([plan(tool_step("1", "calculator")), json.dumps({"expression": "2 * 21"})])
    result = h.run("multiply 2 by 21")
    assert result["status"] == "completed"
    assert result["answer"] == {"expression": "2 * 21", "value": 42}
    assert h.llm.prompts[1]["json_schema"] is None  # the scripted model cannot constrain decoding
    assert '"expression"' in h.llm.prompts[1]["prompt"]


def test_tool_failure_marks_the_step_failed_and_the_run_continues(make_harness: MakeHarness) -> None:
    """FR-054/055: the error is logged and passed to the next LLM cycle; later steps still run."""
    h = make_harness(
        [plan(tool_step("1", "calculator", {"expression": "1 / 0"}), llm_step("2")), answer("cannot")]
    )
    result = h.run()
    steps = h.orchestrator.get_state().plan.steps
    assert [s.status for s in steps] == [StepStatus.FAILED, StepStatus.COMPLETE]
    assert "division by zero" in (steps[0].failure or "")
    assert result["status"] == "failed"
    assert "division by zero" in json.dumps(h.entries[1].errors)
    assert h.entries[1].tool_calls[0].error is not None
    assert "division by zero" in h.llm.prompts[1]["prompt"]


def test_a_result_that_breaks_output_schema_is_a_tool_failure(make_harness: MakeHarness) -> None:
    liar = FunctionTool(
        name="liar",
        description="returns the wrong type",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"value": {"type": "number"}}, "required": ["value"]},
        function=lambda: {"value": "fifteen"},
    )
    h = make_harness([plan(tool_step("1", "liar", {}))], tools=[liar])
    result = h.run()
    call = h.orchestrator.get_state().tool_history[0]
    assert call.result is None and "value" in call.error["message"]
    assert result["status"] == "failed"


def test_a_tool_that_raises_any_exception_fails_only_its_step(make_harness: MakeHarness) -> None:
    def boom() -> dict[str, Any]:
        raise KeyError("internal")

    bad = FunctionTool(
        name="bad",
        description="raises",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        function=boom,
    )
    h = make_harness(
        [plan(tool_step("1", "bad", {}), tool_step("2", "echo", {"message": "still here"}))],
        tools=[bad, EchoTool()],
    )
    result = h.run("run bad, then say still here")
    assert [s["status"] for s in result["plan"]["steps"]] == ["failed", "complete"]
    assert "KeyError" in result["plan"]["steps"][0]["failure"]
    assert result["answer"] == {"message": "still here"}


def test_invalid_arguments_are_repaired_by_the_supervisor(make_harness: MakeHarness) -> None:
    """FR-025/030, US4-4: invalid arguments are rejected and routed to the supervisor, with the exact error."""
    h = make_harness(
        [plan(tool_step("1", "calculator", {"expression": 15})), json.dumps({"expression": "5 + 10"})]
    )
    result = h.run("add 5 and 10")
    assert result["status"] == "completed"
    assert result["answer"]["value"] == 15
    actions = h.entries[1].supervisor_actions
    assert [(a.action_type, a.attempt_number, a.method) for a in actions] == [("tool_call_repair", 1, "llm")]
    assert "15 is not of type 'string'" in h.llm.prompts[1]["prompt"]  # the validator's error, verbatim


def test_malformed_plan_json_is_repaired_without_the_model(make_harness: MakeHarness) -> None:
    """US3-1: code fences and trailing commas are fixed deterministically (json-repair); no LLM call spent."""
    fenced = "```json\n" + json.dumps(SUM_PLAN)[:-1] + ",}\n```"
    h = make_harness([fenced, answer("15")])
    result = h.run()
    assert result["status"] == "completed"
    (action,) = h.entries[0].supervisor_actions
    assert (action.action_type, action.method, action.attempt_number) == ("json_repair", "deterministic", 1)
    assert len(h.llm.prompts) == 2


def test_structurally_invalid_plan_is_repaired(make_harness: MakeHarness) -> None:
    """US3-3: missing step ids are added; the repaired plan keeps the original's meaning."""
    broken = {
        "goal": "echo twice",
        "steps": [
            {"description": "first", "tool": "echo", "arguments": {"message": "a"}},
            {"description": "second", "tool": "echo", "arguments": {"message": "b"}},
        ],
    }
    h = make_harness([broken])
    result = h.run("echo a, then echo b")
    assert result["status"] == "completed"
    assert [s["step_id"] for s in result["plan"]["steps"]] == ["1", "2"]
    assert h.entries[0].supervisor_actions[0].action_type == "plan_repair"


def test_a_repair_may_not_introduce_a_tool(make_harness: MakeHarness) -> None:
    """FR-032, enforced in code: a repaired plan naming a tool the original did not is rejected."""
    broken = {"goal": "say hi", "steps": [{"step_id": "1", "tool": "echo", "arguments": {"message": "hi"}}]}
    sneaky = {
        "goal": "say hi",
        "steps": [
            {
                "step_id": "1",
                "description": "compute",
                "tool": "calculator",
                "arguments": {"expression": "1+1"},
            }
        ],
    }
    honest = {
        "goal": "say hi",
        "steps": [{"step_id": "1", "description": "say hi", "tool": "echo", "arguments": {"message": "hi"}}],
    }
    h = make_harness([broken, sneaky, honest])
    result = h.run("say hi")
    assert result["status"] == "completed"
    assert result["plan"]["steps"][0]["tool"] == "echo"
    first, second = h.entries[0].supervisor_actions
    assert first.error is not None and "calculator" in first.error["message"]
    assert second.repaired_output is not None
    assert [c.tool_name for c in h.orchestrator.get_state().tool_history] == ["echo"]


def test_unrepairable_plan_ends_in_a_structured_failure(make_harness: MakeHarness) -> None:
    """FR-050/051: two attempts, then an unrecoverable error, as a result (not an exception)."""
    h = make_harness(["I think we should add them.", "still not json", "no"])
    result = h.run()
    assert result["status"] == "failed"
    assert result["plan"] is None
    assert "no usable plan" in result["message"]
    (entry,) = h.entries
    assert [(a.attempt_number, a.error is not None) for a in entry.supervisor_actions] == [
        (1, True),
        (2, True),
    ]
    assert entry.errors[0]["type"] == "SupervisorError"
    assert len(h.llm.prompts) == 3  # the plan, then exactly two repair attempts


def test_misspelt_tool_is_repaired_to_a_registered_one(make_harness: MakeHarness) -> None:
    """Missing-tool path: repair_missing_tool_step picks a registered tool (FR-066); the step keeps its id."""
    h = make_harness([plan(tool_step("1", "Calculater", {"expression": "5 + 10"}))])
    result = h.run()
    assert result["status"] == "completed"
    step = result["plan"]["steps"][0]
    assert (step["step_id"], step["tool"], step["status"]) == ("1", "calculator", "complete")
    assert h.entries[1].supervisor_actions[0].action_type == "missing_tool_repair"


def test_step_without_usable_tool_falls_back_to_the_model(make_harness: MakeHarness) -> None:
    """Missing-tool path: when no registered tool fits, the model answers the step from its description."""
    weather = {"goal": "weather", "steps": [tool_step("1", "weather_lookup", {"city": "Oslo"})]}
    h = make_harness(
        [weather, json.dumps({"tool": "none"}), json.dumps({"tool": "forecast"}), answer("Unknown")]
    )
    result = h.run()
    step = result["plan"]["steps"][0]
    assert step["status"] == "complete" and step["result"] == "Unknown"
    assert step["tool"] == "weather_lookup"  # never replaced by something the registry does not have
    assert [a.action_type for a in h.entries[1].supervisor_actions] == ["missing_tool_repair"] * 2
    assert h.orchestrator.get_state().tool_history == ()


def test_ttl_expiry_returns_a_structured_result_and_keeps_the_state(make_harness: MakeHarness) -> None:
    """FR-034…036, SC-006."""
    steps = [tool_step(str(i), "echo", {"message": str(i)}) for i in range(1, 5)]
    h = make_harness([plan(*steps)], ttl=3)
    result = h.run("echo 1, 2, 3 and 4")
    assert result["status"] == "ttl_expired"
    assert len(h.entries) == 3
    assert [s["status"] for s in result["plan"]["steps"]] == ["complete", "complete", "pending", "pending"]
    assert result["final_state"]["ttl_remaining"] == 0
    assert "TTL expired" in result["message"] and "['3', '4']" in result["message"]


def test_model_unavailable_after_retries_fails_the_step_and_ends_the_run(make_harness: MakeHarness) -> None:
    """FR-048/049: three attempts with backoff, then the step fails and the run ends with a structured error."""

    class Down(LLMAdapter):
        calls = 0

        def generate(
            self,
            prompt: str,
            system_prompt: str | None = None,
            max_tokens: int = 2048,
            temperature: float = 0.7,
            *,
            json_schema: dict[str, Any] | None = None,
        ) -> LLMResponse:
            Down.calls += 1
            raise LLMTransientError("connection refused", retry_after=None)

    h = make_harness([])
    h.orchestrator.llm.adapter = Down()
    result = h.run(initial_plan=plan(llm_step("1"), llm_step("2")))
    assert Down.calls == 3
    assert len(h.sleeps) == 2 and all(s > 0 for s in h.sleeps)
    assert result["status"] == "failed"
    assert [s["status"] for s in result["plan"]["steps"]] == ["failed", "pending"]
    assert "unavailable after 3 attempts" in result["errors"][0]["message"]
    assert len(h.entries) == 1


def test_initial_plan_skips_plan_generation(make_harness: MakeHarness) -> None:
    h = make_harness([])
    result = h.run("echo x", initial_plan=Plan.model_validate(plan(tool_step("1", "echo", {"message": "x"}))))
    assert result["status"] == "completed"
    assert [e.phase for e in h.entries] == ["step"]
    assert h.llm.prompts == []


def test_invalid_initial_plan_is_rejected_before_the_run(make_harness: MakeHarness) -> None:
    h = make_harness([])
    with pytest.raises(ValidationError, match="step_id"):
        h.run(initial_plan={"goal": "g", "steps": [{"description": "no id"}]})


def test_statuses_written_by_the_model_are_reset_to_pending(make_harness: MakeHarness) -> None:
    cheeky = plan(tool_step("1", "echo", {"message": "a"}, status="complete"))
    h = make_harness([cheeky])
    result = h.run("echo a")
    assert result["status"] == "completed"
    assert len(h.orchestrator.get_state().tool_history) == 1  # the step really ran


def test_iter_yields_each_cycle_and_state_is_observable(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15")])
    with pytest.raises(OrchestrationError):
        h.orchestrator.get_state()
    seen = []
    for entry in h.orchestrator.iter("calculate the sum of 5 and 10"):
        state = h.orchestrator.get_state()
        seen.append((entry.step_number, state.cycle, state.current_step_id))
    assert seen == [(1, 1, "1"), (2, 2, "2"), (3, 3, None)]
    assert h.orchestrator.result is not None and h.orchestrator.result["status"] == "completed"


def test_empty_request_is_refused(make_harness: MakeHarness) -> None:
    with pytest.raises(ValidationError):
        make_harness([]).run("   ")


def test_run_events_are_emitted(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15")])
    result = h.run()
    names = [name for name, _ in h.sink.events]
    assert names[0] == "aeon_run_start" and names[-1] == "aeon_run_end"
    assert names.count("aeon_cycle_end") == 3
    assert h.sink.of("aeon_tool_called")[0].tool_name == "calculator"
    assert h.sink.of("aeon_run_end")[0] is result


def test_run_ids_are_distinct_version_4_uuids(make_harness: MakeHarness) -> None:
    import uuid

    from aeon_kernel.orchestrator import new_run_id

    ids = {new_run_id() for _ in range(2000)}
    assert len(ids) == 2000
    for run_id in list(ids)[:200]:
        parsed = uuid.UUID(hex=run_id)
        assert (parsed.version, parsed.variant, parsed.hex) == (4, uuid.RFC_4122, run_id)
    h = make_harness([SUM_PLAN, answer("15")])
    assert uuid.UUID(hex=h.run()["run_id"]).version == 4
