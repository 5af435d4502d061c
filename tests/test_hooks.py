"""Each hook doing its job: custom components of every kind through the register hooks, and step policies
through the decision hook."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aeon_kernel import (
    ConvergenceAssessment,
    ConvergenceEngine,
    Engine,
    LLMAdapter,
    LLMResponse,
    LogEntry,
    OrchestrationState,
    PlanStep,
    StepExecutionResult,
    TelemetrySink,
    hookimpl,
)
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.plan.context import StepContext
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.plan_finished import PlanFinished
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.supervisor import DefaultSupervisor
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step

SUM = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))


class Canned(LLMAdapter):
    def __init__(self, replies: list[Any], label: str = "canned") -> None:
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.model_id = label

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        return {"text": self.replies.pop(0), "model": self.model_id}


class TracingMemory(InMemoryKVStore):
    def __init__(self, prefix_note: str = "") -> None:
        super().__init__()
        self.writes: list[str] = []
        self.prefix_note = prefix_note

    def write(self, key: str, value: Any) -> None:
        self.writes.append(key)
        super().write(key, value)


class CountingValidator(SchemaValidator):
    def __init__(self) -> None:
        self.plans = 0

    def validate_plan(self, plan_dict: dict[str, Any]) -> bool:
        self.plans += 1
        return super().validate_plan(plan_dict)


class PickySupervisor(DefaultSupervisor):
    built_with: dict[str, Any] = {}

    def __init__(self, llm: Any, validator: Any, tools: Any, **options: Any) -> None:
        PickySupervisor.built_with = {"llm": llm, "validator": validator, "tools": tools, **options}
        super().__init__(llm, validator, tools)


class NeverConverges(ConvergenceEngine):
    def assess(
        self,
        plan_state: dict[str, Any],
        execution_results: list[dict[str, Any]],
        semantic_validation_report: Any = None,
        custom_criteria: dict[str, Any] | None = None,
    ) -> ConvergenceAssessment:
        return ConvergenceAssessment(converged=False, reason_codes=("answer_not_checked",))


class ListSink(TelemetrySink):
    def __init__(self, label: str = "") -> None:
        self.label = label
        self.entries: list[LogEntry] = []
        self.closed = False

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        self.entries.append(entry)

    def close(self) -> None:
        self.closed = True


class EveryKind:
    """One plugin providing a component of each kind."""

    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("canned", lambda replies: Canned(replies))

    @hookimpl
    def aeon_register_memory_backends(self, register: Any) -> None:
        register("tracing", TracingMemory)

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        from aeon_plugins.calculator import CalculatorTool

        register("calculator", CalculatorTool)

    @hookimpl
    def aeon_register_validators(self, register: Any) -> None:
        register("counting", CountingValidator)

    @hookimpl
    def aeon_register_supervisors(self, register: Any) -> None:
        register("picky", PickySupervisor)

    @hookimpl
    def aeon_register_convergence_engines(self, register: Any) -> None:
        register("never", NeverConverges)
        register("finished", PlanFinished)

    @hookimpl
    def aeon_register_telemetry_sinks(self, register: Any) -> None:
        register("list", ListSink)


def every_kind_config(**overrides: Any) -> AeonConfig:
    config = AeonConfig(telemetry=(Choice("list", {"label": "x"}),), **overrides)
    config = config.with_choice("llm", "canned", replies=[SUM, answer("15")])
    config = config.with_choice("memory", "tracing", prefix_note="n")
    config = config.with_choice("validator", "counting")
    config = config.with_choice("convergence", "finished")
    return config.with_choice("supervisor", "picky", extra_option=1)


def test_components_of_every_kind_come_from_the_register_hooks() -> None:
    engine = Engine(every_kind_config(), plugins=[EveryKind()], autoload=False)
    result = engine.run("add")
    assert result["status"] == "completed" and result["answer"] == "15"
    assert isinstance(engine.llm.adapter, Canned)
    assert isinstance(engine.memory, TracingMemory) and len(engine.memory.writes) == 2
    assert isinstance(engine.validator, CountingValidator) and engine.validator.plans == 1
    assert PickySupervisor.built_with["extra_option"] == 1
    assert PickySupervisor.built_with["llm"] is engine.llm  # FR-028: the same (retry-wrapped) model
    assert PickySupervisor.built_with["tools"] is engine.tools
    (sink,) = engine._sinks
    assert isinstance(sink, ListSink) and sink.label == "x" and len(sink.entries) == 3
    engine.close()
    assert sink.closed


def test_the_convergence_engine_decides_the_final_status() -> None:
    config = every_kind_config().with_choice("convergence", "never")
    result = Engine(config, plugins=[EveryKind()], autoload=False).run("add")
    assert result["status"] == "failed"
    assert result["convergence"]["reason_codes"] == ["answer_not_checked"]
    assert [s["status"] for s in result["plan"]["steps"]] == ["complete", "complete"]


def test_a_tryfirst_step_policy_can_deny_a_step(make_harness: MakeHarness) -> None:
    class NoCalculator:
        @hookimpl(tryfirst=True)
        def aeon_execute_step(self, step: PlanStep, context: StepContext) -> StepExecutionResult | None:
            if step.tool == "calculator":
                return StepExecutionResult(success=False, error="denied by policy", execution_mode="tool")
            return None

    h = make_harness([SUM, answer("no")], plugins=(NoCalculator(),))
    result = h.run()
    assert result["plan"]["steps"][0]["failure"] == "denied by policy"
    assert result["plan"]["steps"][1]["status"] == "complete"  # None → the kernel ran the llm step
    assert h.orchestrator.get_state().tool_history == ()


def test_a_wrapper_sees_every_step_and_its_result(make_harness: MakeHarness) -> None:
    seen: list[tuple[str, bool]] = []

    class Timer:
        @hookimpl(wrapper=True)
        def aeon_execute_step(self, step: PlanStep, context: StepContext) -> Any:
            assert context.state.current_step_id == step.step_id
            result = yield
            seen.append((step.step_id, result.success))
            return result

    h = make_harness([SUM, answer("15")], plugins=(Timer(),))
    assert h.run()["status"] == "completed"
    assert seen == [("1", True), ("2", True)]


def test_a_step_plugin_that_raises_fails_only_that_step(make_harness: MakeHarness) -> None:
    class Buggy:
        @hookimpl(tryfirst=True)
        def aeon_execute_step(self, step: PlanStep, context: StepContext) -> StepExecutionResult | None:
            if step.step_id == "1":
                raise RuntimeError("plugin bug")
            return None

    h = make_harness([SUM, answer("ok")], plugins=(Buggy(),))
    result = h.run()
    assert [s["status"] for s in result["plan"]["steps"]] == ["failed", "complete"]
    assert "plugin bug" in result["plan"]["steps"][0]["failure"]


def test_a_failing_event_hook_never_breaks_the_run(make_harness: MakeHarness) -> None:
    class Broken:
        @hookimpl
        def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
            raise OSError("disk full")

        @hookimpl
        def aeon_run_start(
            self, run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
        ) -> None:
            raise OSError("no")

    h = make_harness([SUM, answer("15")], plugins=(Broken(),))
    assert h.run()["status"] == "completed"
    assert len(h.orchestrator.telemetry_errors) == 4
    assert len(h.entries) == 3  # other sinks still got every cycle


def test_supervisor_actions_are_events(make_harness: MakeHarness) -> None:
    h = make_harness(["```json\n" + json.dumps(SUM) + "\n```", answer("15")])
    h.run()
    (action,) = h.sink.of("aeon_supervisor_action")
    assert action.method == "deterministic" and action.action_type == "json_repair"
    assert h.entries[0].supervisor_actions == (action,)


@pytest.mark.parametrize(
    "hook", ["aeon_run_start", "aeon_run_end", "aeon_tool_called", "aeon_step_status_changed"]
)
def test_event_hooks_fire(make_harness: MakeHarness, hook: str) -> None:
    h = make_harness([SUM, answer("15")])
    h.run()
    assert h.sink.of(hook)
