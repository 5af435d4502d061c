"""Each hook doing its job, one ``test_hook_<name>`` per hook (datasette's pattern; tests/test_hooks_meta.py checks
that none is missing): custom components of every kind through the register hooks, step and tool policies
through the decision hooks, and the events with their arguments, in order."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aeon_kernel import (
    HOOKSPEC_VERSION,
    ConvergenceAssessment,
    ConvergenceEngine,
    Engine,
    FunctionTool,
    LLMAdapter,
    LLMResponse,
    LogEntry,
    OrchestrationState,
    Plan,
    Planner,
    PlanStep,
    StepExecutionResult,
    StepStatus,
    SupervisorAction,
    TelemetrySink,
    Tool,
    ToolCall,
    ToolContext,
    ToolRegistry,
    hookimpl,
)
from aeon_kernel.config import AeonConfig, Choice
from aeon_kernel.errors import UnknownComponentError
from aeon_kernel.kit import RecordAction, current_idempotency_key
from aeon_kernel.runtime.context import RunContext
from aeon_kernel.runtime.scheduler import Conclusion, Scheduler, Verdict, Work
from aeon_kernel.steps import StepContext
from aeon_kernel.testing import RecordingSink
from aeon_plugins import sqlite_state
from aeon_plugins.in_memory import InMemoryKVStore
from aeon_plugins.plan_finished import PlanFinished
from aeon_plugins.schema_validator import SchemaValidator
from aeon_plugins.sqlite_state import SqliteStateStore
from aeon_plugins.supervisor import DefaultSupervisor
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step

SUM = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))
SUM_RESULT = {"expression": "5 + 10", "value": 15}
#: one step that works, one whose tool fails (the calculator refuses to divide by zero)
WORKS_THEN_FAILS = plan(
    tool_step("1", "calculator", {"expression": "5 + 10"}),
    tool_step("2", "calculator", {"expression": "1 / 0"}),
)
THREE_ECHOES = plan(*[tool_step(str(i), "echo", {"message": m}) for i, m in enumerate("abc", 1)], goal="echo")

OrchestratorFactory = Callable[..., Any]


# --- components a plugin provides ----------------------------------------------------------------------------


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
        super().__init__(keep_runs=True)  # read back after the run
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
    def __init__(self, llm: Any, validator: Any, tools: Any, **options: Any) -> None:
        self.built_with = {"llm": llm, "validator": validator, "tools": tools, **options}
        self.json_repairs: list[str] = []
        super().__init__(llm, validator, tools)

    def repair_json(
        self,
        malformed_json: str,
        expected_schema: dict[str, Any] | None = None,
        max_attempts: int = 2,
        *,
        record: RecordAction | None = None,
    ) -> Any:
        self.json_repairs.append(malformed_json)
        return super().repair_json(malformed_json, expected_schema, max_attempts, record=record)


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
    """One plugin providing a component of each kind ``aeon.toml`` chooses with ``use = NAME``."""

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


def every_kind_config(replies: list[Any] | None = None, **overrides: Any) -> AeonConfig:
    config = AeonConfig(telemetry=(Choice("list", {"label": "x"}),), **overrides)
    config = config.with_choice("llm", "canned", replies=replies or [SUM, answer("15")])
    config = config.with_choice("memory", "tracing", prefix_note="n")
    config = config.with_choice("validator", "counting")
    config = config.with_choice("convergence", "finished")
    return config.with_choice("supervisor", "picky", extra_option=1)


def every_kind_engine(config: AeonConfig | None = None) -> Engine:
    return Engine(config or every_kind_config(), plugins=[EveryKind()], autoload=False)


class Spy:
    """Records every event hook call with all its arguments, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def of(self, hook: str) -> list[dict[str, Any]]:
        return [kwargs for name, kwargs in self.calls if name == hook]

    @property
    def order(self) -> list[str]:
        return [name for name, _ in self.calls]

    @hookimpl
    def aeon_run_start(
        self, run_id: str, request: str, state: OrchestrationState, manifest: dict[str, Any]
    ) -> None:
        self.calls.append(
            ("aeon_run_start", {"run_id": run_id, "request": request, "state": state, "manifest": manifest})
        )

    @hookimpl
    def aeon_run_resumed(self, run_id: str, state: OrchestrationState, entries: tuple[LogEntry, ...]) -> None:
        self.calls.append(("aeon_run_resumed", {"run_id": run_id, "state": state, "entries": entries}))

    @hookimpl
    def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
        self.calls.append(("aeon_cycle_end", {"entry": entry, "state": state}))

    @hookimpl
    def aeon_step_status_changed(self, run_id: str, step: PlanStep, previous: StepStatus) -> None:
        self.calls.append(
            ("aeon_step_status_changed", {"run_id": run_id, "step": step, "previous": previous})
        )

    @hookimpl
    def aeon_tool_called(self, run_id: str, call: ToolCall) -> None:
        self.calls.append(("aeon_tool_called", {"run_id": run_id, "call": call}))

    @hookimpl
    def aeon_model_called(self, run_id: str, cycle: int, call: dict[str, Any]) -> None:
        self.calls.append(("aeon_model_called", {"run_id": run_id, "cycle": cycle, "call": call}))

    @hookimpl
    def aeon_supervisor_action(self, run_id: str, action: SupervisorAction) -> None:
        self.calls.append(("aeon_supervisor_action", {"run_id": run_id, "action": action}))

    @hookimpl
    def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
        self.calls.append(("aeon_run_end", {"run_id": run_id, "result": result}))


def spy_tool(invocations: list[dict[str, Any]]) -> Tool:
    """A tool that remembers each invocation: its arguments and the idempotency key it ran under."""

    def run(**kwargs: Any) -> dict[str, Any]:
        invocations.append({"arguments": kwargs, "key": current_idempotency_key()})
        return {"message": kwargs["message"]}

    schema = {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
        "additionalProperties": False,
    }
    return FunctionTool(
        name="spy", description="Remember the call.", input_schema=schema, output_schema=schema, function=run
    )


# --- discovery: aeon_register_* ------------------------------------------------------------------------------


def test_hook_aeon_register_llm_adapters() -> None:
    engine = every_kind_engine()
    result = engine.run("add 5 and 10")
    assert result["status"] == "completed" and result["answer"] == "15"
    adapter = engine.llm.adapter
    assert isinstance(adapter, Canned)  # chosen by name, built from the [llm] table's options
    assert adapter.replies == []  # both replies were the run's: the plan and the llm step's answer
    assert engine.manifest()["model"] == "canned"


def test_hook_aeon_register_memory_backends() -> None:
    engine = every_kind_engine()
    run_id = engine.run("add")["run_id"]
    memory = engine.memory
    assert isinstance(memory, TracingMemory) and memory.prefix_note == "n"
    assert memory.writes == [f"run/{run_id}/1", f"run/{run_id}/2"]  # each step's result went to it
    assert memory.read(f"run/{run_id}/1") == SUM_RESULT


class ScaleTool(Tool):
    name: str = "scale"
    description: str = "Multiply n by the configured factor."
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    output_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    factor: int = 1

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        return {"n": kwargs["n"] * self.factor}


def test_hook_aeon_register_tools() -> None:
    class Tools:
        @hookimpl
        def aeon_register_tools(self, register: Any) -> None:
            register("scale", lambda factor=1: ScaleTool(factor=factor))
            register("echo", lambda: pytest.fail("a tool [tools] enabled leaves out is never built"))

    config = every_kind_config(
        [plan(tool_step("1", "scale", {"n": 5}))],
        tools_enabled=("scale",),
        tool_options={"scale": {"factor": 10}},
    )
    engine = Engine(config, plugins=[EveryKind(), Tools()], autoload=False)
    assert engine.tools.list_all() == ["scale"]  # the subset [tools] enabled lists, not calculator or echo
    result = engine.run("scale 5")
    assert result["status"] == "completed"
    assert result["answer"] == {"n": 50}  # built with its [tools.scale] options


def test_hook_aeon_register_validators() -> None:
    engine = every_kind_engine()
    assert engine.run("add 5 and 10")["status"] == "completed"
    validator = engine.validator
    # the model planner checks the model's plan (to repair it); the kernel checks any plan it accepts that this
    # validator has not just accepted (a planner plugin's: tests/test_limits.py), so this one once (issue 31)
    assert isinstance(validator, CountingValidator) and validator.plans == 1
    assert isinstance(engine.supervisor, PickySupervisor)
    assert engine.supervisor.built_with["validator"] is validator  # the supervisor checks repairs with it


def test_hook_aeon_register_supervisors() -> None:
    fenced = "```json\n" + json.dumps(SUM) + "\n```"  # not JSON as it stands: the supervisor repairs it
    engine = every_kind_engine(every_kind_config([fenced, answer("15")]))
    assert engine.run("add 5 and 10")["status"] == "completed"
    supervisor = engine.supervisor
    assert isinstance(supervisor, PickySupervisor)
    assert supervisor.json_repairs == [fenced]  # the chosen supervisor did the repair
    assert supervisor.built_with["extra_option"] == 1  # from the [supervisor] table
    assert supervisor.built_with["llm"] is engine.llm  # FR-028: the same (retry-wrapped) model
    assert supervisor.built_with["tools"] is engine.tools


def test_hook_aeon_register_convergence_engines() -> None:
    finished = every_kind_engine().run("add 5 and 10")
    assert finished["status"] == "completed" and finished["convergence"]["converged"] is True

    never = every_kind_engine(every_kind_config().with_choice("convergence", "never")).run("add 5 and 10")
    assert never["status"] == "failed"
    assert never["convergence"]["reason_codes"] == ["answer_not_checked"]
    assert [s["status"] for s in never["plan"]["steps"]] == ["complete", "complete"]


def test_hook_aeon_register_telemetry_sinks() -> None:
    engine = every_kind_engine()
    engine.run("add")
    (sink,) = engine.components.sinks
    assert isinstance(sink, ListSink) and sink.label == "x"  # options from [telemetry.list]
    assert engine.pm.is_registered(sink)  # so it receives the event hooks
    assert [e.step_number for e in sink.entries] == [1, 2, 3]
    engine.close()
    assert sink.closed


def test_hook_aeon_register_state_stores(
    tmp_path: Path, aeon_orchestrator_factory: OrchestratorFactory
) -> None:
    events: list[str] = []

    class TracingStore(SqliteStateStore):
        def create_run(self, state: OrchestrationState, manifest: dict[str, Any]) -> None:
            events.append("create")
            super().create_run(state, manifest)

        def commit_cycle(
            self, state: OrchestrationState, entry: LogEntry, calls: list[dict[str, Any]]
        ) -> None:
            events.append(f"commit {entry.step_number}")
            super().commit_cycle(state, entry, calls)

        def finish_run(self, state: OrchestrationState, result: dict[str, Any]) -> None:
            events.append(f"finish {result['status']}")
            super().finish_run(state, result)

    class Stores:
        @hookimpl
        def aeon_register_state_stores(self, register: Any) -> None:
            register("tracing", lambda path: TracingStore(path))

        @hookimpl
        def aeon_cycle_end(self, entry: LogEntry, state: OrchestrationState) -> None:
            events.append(f"log {entry.step_number}")

    config = AeonConfig(state=Choice("tracing", {"path": str(tmp_path / "runs.db")}))
    orchestrator = aeon_orchestrator_factory([THREE_ECHOES], plugins=(Stores(),), config=config)
    result = orchestrator.execute("echo a, b and c")
    assert result["status"] == "completed"
    assert isinstance(orchestrator.state_store, TracingStore)
    # every cycle is committed before it is logged (FR-013)
    assert events == [
        "create",
        *[f"{what} {n}" for n in range(1, 5) for what in ("commit", "log")],
        "finish completed",
    ]
    stored = orchestrator.state_store.load(result["run_id"])
    assert stored.state.model_dump(mode="json") == result["final_state"]


class FixedPlanner(Planner):
    """Writes the same plan whatever the request: the model is never asked for one."""

    def __init__(
        self, llm: Any, validator: Any, supervisor: Any, max_tokens: int, temperature: float, goal: str
    ) -> None:
        self.built_with = {
            "llm": llm,
            "validator": validator,
            "supervisor": supervisor,
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        self.goal = goal
        self.asked: list[tuple[str, Any, list[str]]] = []

    def generate_plan(
        self,
        task_description: str,
        task_profile: Any,
        tool_registry: ToolRegistry,
        *,
        record: RecordAction | None = None,
    ) -> Plan:
        self.asked.append((task_description, task_profile, sorted(tool_registry.list_all())))
        return Plan.model_validate(
            plan(tool_step("1", "calculator", {"expression": "2 * 21"}), goal=self.goal)
        )


def test_hook_aeon_register_planners(aeon_orchestrator_factory: OrchestratorFactory) -> None:
    class Planners:
        @hookimpl
        def aeon_register_planners(self, register: Any) -> None:
            register("fixed", FixedPlanner)

    config = AeonConfig(max_tokens=77, temperature=0.25).with_choice("planner", "fixed", goal="answer 42")
    orchestrator = aeon_orchestrator_factory(
        [], plugins=(Planners(),), config=config
    )  # a model with no reply
    result = orchestrator.execute("what is 2 * 21?")
    assert result["status"] == "completed", result["message"]
    assert result["answer"] == {"expression": "2 * 21", "value": 42}
    assert result["plan"]["goal"] == "answer 42"
    planner = orchestrator.components.planner
    assert isinstance(planner, FixedPlanner)
    assert planner.asked == [("what is 2 * 21?", None, ["calculator", "echo"])]
    assert orchestrator.llm.adapter.prompts == []  # the model was never asked for a plan (or anything else)
    components = orchestrator.components
    assert planner.built_with == {
        "llm": components.llm,
        "validator": components.validator,
        "supervisor": components.supervisor,
        "max_tokens": 77,  # [run] max_tokens and temperature
        "temperature": 0.25,
    }


class ShoutingScheduler(Scheduler):
    """Shouts the request one word per cycle: no plan, no model, no steps."""

    def __init__(self, separator: str = " ") -> None:
        self.separator = separator
        self.words: list[str] = []
        self.shouted: list[str] = []

    def start(self, run: RunContext, *, resumed: bool) -> None:
        self.words = run.state.request.split(self.separator)

    def status(self, run: RunContext) -> Verdict | None:
        return Verdict("completed") if len(self.shouted) == len(self.words) else None

    def next_work(self, run: RunContext) -> Work:
        return Work("step")

    def perform(self, work: Work, run: RunContext) -> Any:
        return self.words[len(self.shouted)].upper()

    def apply(self, work: Work, outcome: Any, run: RunContext) -> None:
        self.shouted.append(outcome)

    def conclude(self, state: OrchestrationState, verdict: Verdict) -> Conclusion:
        return Conclusion(answer=" ".join(self.shouted), message=f"shouted {len(self.shouted)} words")


def test_hook_aeon_register_schedulers(
    aeon_orchestrator_factory: OrchestratorFactory, aeon_recording_sink: RecordingSink
) -> None:
    built: list[ShoutingScheduler] = []

    class Schedulers:
        @hookimpl
        def aeon_register_schedulers(self, register: Any) -> None:
            def factory(**options: Any) -> ShoutingScheduler:
                built.append(ShoutingScheduler(**options))
                return built[-1]

            register("shout", factory)

    config = AeonConfig().with_choice("scheduler", "shout", separator="-")
    orchestrator = aeon_orchestrator_factory([], plugins=(Schedulers(),), config=config, ttl=10)
    result = orchestrator.execute("make-some-noise")
    assert (result["status"], result["answer"], result["message"]) == (
        "completed",
        "MAKE SOME NOISE",
        "shouted 3 words",
    )
    assert result["final_state"]["cycle"] == 3 and result["final_state"]["ttl_remaining"] == 7
    assert result["plan"] is None and orchestrator.llm.adapter.prompts == []
    assert [(e.step_number, e.phase) for e in aeon_recording_sink.entries] == [
        (1, "step"),
        (2, "step"),
        (3, "step"),
    ]
    # the factory is called once per run: a scheduler belongs to one run
    assert orchestrator.execute("once-more")["answer"] == "ONCE MORE"
    assert len(built) == 2 and built[0] is not built[1] and built[0].shouted == ["MAKE", "SOME", "NOISE"]

    with pytest.raises(UnknownComponentError, match=r"'linear' \(from aeon.planning\)"):
        Engine(AeonConfig().with_choice("scheduler", "nope"), autoload=False).scheduler()


# --- decisions: aeon_execute_step, aeon_invoke_tool ----------------------------------------------------------


def test_hook_aeon_execute_step(make_harness: MakeHarness) -> None:
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


SPY_THEN_ECHO = plan(tool_step("1", "spy", {"message": "secret"}), tool_step("2", "echo", {"message": "hi"}))


def test_hook_aeon_invoke_tool(make_harness: MakeHarness) -> None:
    """A ``tryfirst`` policy denies one tool: the step fails with its message and the tool never runs."""
    from aeon_plugins.echo import EchoTool

    class NoSpying:
        @hookimpl(tryfirst=True)
        def aeon_invoke_tool(
            self, tool: Tool, arguments: dict[str, Any], context: ToolContext
        ) -> ToolCall | None:
            if tool.name != "spy":
                return None  # the next implementation (the kernel's) runs the call
            error = {"type": "PolicyDenied", "message": "spy is not allowed here"}
            return ToolCall(tool_name=tool.name, arguments=arguments, step_id=context.step_id, error=error)

    invocations: list[dict[str, Any]] = []
    spy = Spy()
    h = make_harness([SPY_THEN_ECHO], tools=[spy_tool(invocations), EchoTool()], plugins=(NoSpying(), spy))
    result = h.run("spy on secret, then say hi")
    assert invocations == []  # the tool was never invoked
    step1, step2 = result["plan"]["steps"]
    assert (step1["status"], step1["failure"]) == ("failed", "spy is not allowed here")
    assert (step2["status"], step2["result"]) == ("complete", {"message": "hi"})
    denied, echoed = h.orchestrator.get_state().tool_history
    assert (denied.tool_name, denied.result, denied.error["type"]) == ("spy", None, "PolicyDenied")
    assert (echoed.tool_name, echoed.result, echoed.error) == ("echo", {"message": "hi"}, None)
    assert [c["call"] for c in spy.of("aeon_tool_called")] == [denied, echoed]  # the denial is reported too
    assert result["status"] == "failed"


def test_a_tool_wrapper_sees_every_call_and_its_record(make_harness: MakeHarness) -> None:
    seen: list[tuple[str, dict[str, Any], str, ToolCall]] = []

    class Timer:
        @hookimpl(wrapper=True)
        def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> Any:
            call = yield
            seen.append((tool.name, arguments, context.step_id, call))
            return call

    h = make_harness([WORKS_THEN_FAILS], plugins=(Timer(),))
    h.run()
    ok, failed = h.orchestrator.get_state().tool_history
    assert seen == [
        ("calculator", {"expression": "5 + 10"}, "1", ok),
        ("calculator", {"expression": "1 / 0"}, "2", failed),
    ]
    assert ok.result == SUM_RESULT and failed.error["message"] == "calculator failed: division by zero"


def test_a_tool_wrapper_can_replace_the_record(make_harness: MakeHarness) -> None:
    class Redact:
        @hookimpl(wrapper=True)
        def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> Any:
            call = yield
            return call.model_copy(update={"result": {"message": "[redacted]"}})

    h = make_harness([plan(tool_step("1", "echo", {"message": "password"}))], plugins=(Redact(),))
    result = h.run("echo password")
    assert result["answer"] == {"message": "[redacted]"}
    assert h.memory.read(f"run/{result['run_id']}/1") == {"message": "[redacted]"}


def test_a_tool_plugin_that_raises_fails_only_that_step(make_harness: MakeHarness) -> None:
    class Buggy:
        @hookimpl(tryfirst=True)
        def aeon_invoke_tool(
            self, tool: Tool, arguments: dict[str, Any], context: ToolContext
        ) -> ToolCall | None:
            if context.step_id == "1":
                raise RuntimeError("sandbox crashed")
            return None

    result = make_harness([THREE_ECHOES], plugins=(Buggy(),)).run("echo a, b and c")
    assert [s["status"] for s in result["plan"]["steps"]] == ["failed", "complete", "complete"]
    assert result["plan"]["steps"][0]["failure"] == "RuntimeError: sandbox crashed"


def test_the_tool_context_names_the_run_the_step_and_the_idempotency_key(make_harness: MakeHarness) -> None:
    contexts: list[tuple[Tool, dict[str, Any], ToolContext]] = []

    class Watch:
        @hookimpl(tryfirst=True)
        def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> None:
            contexts.append((tool, arguments, context))
            assert current_idempotency_key() is None  # the key is set around the tool itself, not the hook

    invocations: list[dict[str, Any]] = []
    steps = plan(tool_step("a", "spy", {"message": "one"}), tool_step("b", "spy", {"message": "two"}))
    h = make_harness([steps], tools=[spy_tool(invocations)], plugins=(Watch(),))
    run_id = h.run()["run_id"]
    tool = h.orchestrator.tools.get("spy")
    assert [(t, a, c.run_id, c.step_id, c.idempotency_key) for t, a, c in contexts] == [
        (tool, {"message": "one"}, run_id, "a", f"{run_id}:a"),
        (tool, {"message": "two"}, run_id, "b", f"{run_id}:b"),
    ]
    # the kernel's implementation runs the tool under the context's key
    assert invocations == [
        {"arguments": {"message": "one"}, "key": f"{run_id}:a"},
        {"arguments": {"message": "two"}, "key": f"{run_id}:b"},
    ]


@pytest.mark.parametrize(
    ("answer_with", "why"),
    [
        (
            {"error": {"type": "Denied"}},
            "Denied",
        ),  # an error without a message: still a refusal, still recorded
        ({}, "neither a result nor an error"),
        ({"result": {"message": 42}}, "spy result invalid"),  # a replaced result must match output_schema too
        ("not a record", "got str instead of a ToolCall"),
    ],
)
def test_an_unusable_tool_record_fails_the_step_and_is_kept(
    make_harness: MakeHarness, answer_with: Any, why: str
) -> None:
    class Odd:
        @hookimpl(tryfirst=True)
        def aeon_invoke_tool(self, tool: Tool, arguments: dict[str, Any], context: ToolContext) -> Any:
            if not isinstance(answer_with, dict):
                return answer_with
            return ToolCall(tool_name=tool.name, arguments=arguments, step_id=context.step_id, **answer_with)

    invocations: list[dict[str, Any]] = []
    steps = plan(tool_step("1", "spy", {"message": "hi"}))
    h = make_harness([steps], tools=[spy_tool(invocations)], plugins=(Odd(),))
    result = h.run()
    (step,) = result["plan"]["steps"]
    assert step["status"] == "failed" and why in step["failure"]
    (call,) = h.orchestrator.get_state().tool_history
    assert call.result is None and why in str(call.error)
    assert invocations == []


# --- events --------------------------------------------------------------------------------------------------


def test_hook_aeon_run_start(aeon_orchestrator_factory: OrchestratorFactory) -> None:
    spy = Spy()
    responses = [SUM, answer("15")]
    orchestrator = aeon_orchestrator_factory(responses, plugins=(spy,), ttl=9)
    result = orchestrator.execute("add 5 and 10")
    assert spy.order[0] == "aeon_run_start" and spy.order.count("aeon_run_start") == 1
    (start,) = spy.of("aeon_run_start")
    assert (start["run_id"], start["request"]) == (result["run_id"], "add 5 and 10")
    state = start["state"]
    assert (state.run_id, state.cycle, state.ttl_remaining, state.plan, state.status) == (
        result["run_id"],
        0,
        9,
        None,
        "running",
    )
    manifest = start["manifest"]
    assert manifest["run_id"] == result["run_id"]
    assert manifest["hookspec_version"] == HOOKSPEC_VERSION and manifest["model"] == "scripted"
    config = AeonConfig().with_choice("llm", "scripted", responses=responses)
    assert manifest["config_fingerprint"] == config.fingerprint()
    assert "aeon_plugins.calculator" in [p["name"] for p in manifest["plugins"]]

    # with an initial plan, the state the run starts from already holds it
    orchestrator = aeon_orchestrator_factory([answer("15")], plugins=(spy,))
    orchestrator.execute("add 5 and 10", initial_plan=SUM)
    state = spy.of("aeon_run_start")[-1]["state"]
    assert state.plan is not None and state.plan.goal == SUM["goal"] and state.current_step_id == "1"


def test_hook_aeon_run_resumed(tmp_path: Path, aeon_orchestrator_factory: OrchestratorFactory) -> None:
    config = AeonConfig(state=Choice("sqlite", {"path": str(tmp_path / "runs.db")}))
    first = aeon_orchestrator_factory([THREE_ECHOES], plugins=(sqlite_state,), config=config)
    cycles = first.iter("echo a, b and c")
    committed = [next(cycles) for _ in range(3)]  # the plan and two steps; then the process "stops"
    cycles.close()
    run_id = committed[0].run_id

    spy = Spy()
    second = aeon_orchestrator_factory([], plugins=(sqlite_state, spy), config=config)
    for _ in second.resume(run_id):
        pass
    assert spy.order[:2] == ["aeon_run_resumed", "aeon_run_start"]  # before the resumed run starts
    (resumed,) = spy.of("aeon_run_resumed")
    assert resumed["run_id"] == run_id
    assert [e.step_number for e in resumed["entries"]] == [1, 2, 3]
    assert [e.model_dump(exclude={"duration_ms"}) for e in resumed["entries"]] == [
        e.model_dump(exclude={"duration_ms"}) for e in committed
    ]
    state = resumed["state"]
    assert (state.run_id, state.cycle, state.current_step_id) == (run_id, 3, "3")
    assert [s.status for s in state.plan.steps] == [
        StepStatus.COMPLETE,
        StepStatus.COMPLETE,
        StepStatus.PENDING,
    ]
    # the resumed run executes only what was left
    assert [c["call"].step_id for c in spy.of("aeon_tool_called")] == ["3"]
    assert second.result is not None and second.result["status"] == "completed"


def test_hook_aeon_cycle_end(make_harness: MakeHarness) -> None:
    spy = Spy()
    h = make_harness([SUM, answer("15")], plugins=(spy,), ttl=10)
    result = h.run()
    ends = spy.of("aeon_cycle_end")
    entries = [e["entry"] for e in ends]
    assert [(e.step_number, e.phase, e.step_id, e.ttl_remaining) for e in entries] == [
        (1, "plan", None, 9),
        (2, "step", "1", 8),
        (3, "step", "2", 7),
    ]
    assert {e.run_id for e in entries} == {result["run_id"]}
    # the state is the one after the cycle; the entry's plan_state the one before it
    for end in ends:
        entry, state = end["entry"], end["state"]
        assert (state.cycle, state.ttl_remaining) == (entry.step_number, entry.ttl_remaining)
    assert entries[0].plan_state is None and ends[0]["state"].plan is not None
    assert entries[1].plan_state.steps[0].status is StepStatus.PENDING  # marked running in the cycle
    assert ends[1]["state"].plan.steps[0].status is StepStatus.COMPLETE
    assert entries[1].step_status is StepStatus.COMPLETE
    assert entries[1].tool_calls[0].result == SUM_RESULT
    assert spy.order.index("aeon_run_end") > max(
        i for i, name in enumerate(spy.order) if name == "aeon_cycle_end"
    )

    # a failing cycle is reported too: the model is unavailable, the run fails
    spy = Spy()
    failed = make_harness([], plugins=(spy,)).run()
    (end,) = spy.of("aeon_cycle_end")
    assert failed["status"] == "failed"
    assert end["entry"].errors and "no response left" in end["entry"].errors[0]["message"]


def test_hook_aeon_step_status_changed(make_harness: MakeHarness) -> None:
    spy = Spy()
    result = make_harness([WORKS_THEN_FAILS], plugins=(spy,)).run()
    changes = spy.of("aeon_step_status_changed")
    assert {c["run_id"] for c in changes} == {result["run_id"]}
    assert [(c["step"].step_id, c["previous"], c["step"].status) for c in changes] == [
        ("1", StepStatus.PENDING, StepStatus.RUNNING),
        ("1", StepStatus.RUNNING, StepStatus.COMPLETE),
        ("2", StepStatus.PENDING, StepStatus.RUNNING),
        ("2", StepStatus.RUNNING, StepStatus.FAILED),
    ]
    assert changes[1]["step"].result == SUM_RESULT  # the step after the change
    assert changes[3]["step"].failure == "calculator failed: division by zero"


def test_hook_aeon_tool_started(make_harness: MakeHarness) -> None:
    """Before each tool call of a step, with the validated arguments, the sensitive ones redacted."""
    from aeon_kernel import FunctionTool
    from aeon_plugins.calculator import CalculatorTool

    heard: list[tuple[str, dict[str, Any]]] = []

    class Started:
        @hookimpl
        def aeon_tool_started(
            self, run_id: str, step_id: str, tool_name: str, arguments: dict[str, Any]
        ) -> None:
            heard.append(
                ("started", {"run_id": run_id, "step_id": step_id, "tool": tool_name, "args": arguments})
            )

        @hookimpl
        def aeon_tool_called(self, run_id: str, call: ToolCall) -> None:
            heard.append(("called", {"tool": call.tool_name}))

    login = FunctionTool(
        name="login",
        description="Log in.",
        input_schema={
            "type": "object",
            "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
        },
        output_schema={"type": "object"},
        function=lambda user, password: {"ok": True},
        sensitive_arguments=frozenset({"password"}),
    )
    steps = plan(
        tool_step("1", "calculator", {"expression": "5 + 10"}),
        tool_step("2", "login", {"user": "ann", "password": "s3cret"}),
    )
    h = make_harness([steps], tools=[CalculatorTool(), login], plugins=(Started(),))
    result = h.run()
    assert [name for name, _ in heard] == ["started", "called", "started", "called"]
    first, second = heard[0][1], heard[2][1]
    assert first == {
        "run_id": result["run_id"],
        "step_id": "1",
        "tool": "calculator",
        "args": {"expression": "5 + 10"},
    }
    assert second["args"] == {"user": "ann", "password": "[redacted]"}
    assert "s3cret" not in json.dumps(heard)


def test_hook_aeon_tool_called(make_harness: MakeHarness) -> None:
    spy = Spy()
    h = make_harness([WORKS_THEN_FAILS], plugins=(spy,))
    result = h.run()
    calls = spy.of("aeon_tool_called")
    assert {c["run_id"] for c in calls} == {result["run_id"]}
    ok, failed = (c["call"] for c in calls)
    assert (ok.step_id, ok.tool_name, ok.arguments, ok.result, ok.error) == (
        "1",
        "calculator",
        {"expression": "5 + 10"},
        SUM_RESULT,
        None,
    )
    assert (failed.step_id, failed.result) == ("2", None)
    assert failed.error["message"] == "calculator failed: division by zero"
    assert [ok, failed] == list(h.orchestrator.get_state().tool_history)
    # each is reported during its own cycle, before that cycle's record
    assert [name for name in spy.order if name in ("aeon_tool_called", "aeon_cycle_end")] == [
        "aeon_cycle_end",
        "aeon_tool_called",
        "aeon_cycle_end",
        "aeon_tool_called",
        "aeon_cycle_end",
    ]


def test_hook_aeon_model_called(make_harness: MakeHarness) -> None:
    # a plan that needs its fence repaired (the repair is deterministic: no model call), a tool step, an answer
    spy = Spy()
    the_plan = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2", "say the sum"))
    h = make_harness(["```json\n" + json.dumps(the_plan) + "\n```", answer("15")], plugins=(spy,))
    result = h.run("calculate the sum of 5 and 10")
    made = spy.of("aeon_model_called")
    assert {m["run_id"] for m in made} == {result["run_id"]}
    assert [(m["cycle"], m["call"]["number"]) for m in made] == [(1, 0), (3, 0)]
    planning, answering = (m["call"] for m in made)
    assert planning["request"]["prompt"].endswith("Request: calculate the sum of 5 and 10\nPlan:")
    assert planning["request"]["system_prompt"] and planning["request"]["max_tokens"] > 0
    assert planning["text"].startswith("```json") and "say the sum" in answering["request"]["prompt"]
    assert 0 < planning["started_ns"] < answering["started_ns"] <= time.time_ns()  # wall clock, in order
    # the outputs are the ones the state keeps, which hold no prompt
    kept = h.orchestrator.get_state().llm_outputs
    assert [c["text"] for c in kept] == [planning["text"], answering["text"]]
    assert all("request" not in c for c in kept)
    # each is reported as its cycle ends, before that cycle's record
    assert [name for name in spy.order if name in ("aeon_model_called", "aeon_cycle_end")] == [
        "aeon_model_called",
        "aeon_cycle_end",
        "aeon_cycle_end",
        "aeon_model_called",
        "aeon_cycle_end",
    ]


def test_hook_aeon_supervisor_action(make_harness: MakeHarness) -> None:
    spy = Spy()
    h = make_harness(["```json\n" + json.dumps(SUM) + "\n```", answer("15")], plugins=(spy,))
    result = h.run()
    (reported,) = spy.of("aeon_supervisor_action")
    action = reported["action"]
    assert reported["run_id"] == result["run_id"]
    assert action.method == "deterministic" and action.action_type == "json_repair"
    assert action.repaired_output is not None and action.error is None
    assert h.entries[0].supervisor_actions == (action,)  # in the plan cycle's record
    assert spy.order.index("aeon_supervisor_action") < spy.order.index("aeon_cycle_end")


def test_hook_aeon_run_end(make_harness: MakeHarness) -> None:
    spy = Spy()
    h = make_harness([SUM, answer("15")], plugins=(spy,))
    result = h.run()
    assert spy.order[-1] == "aeon_run_end" and spy.order.count("aeon_run_end") == 1
    (end,) = spy.of("aeon_run_end")
    assert end["run_id"] == result["run_id"]
    assert end["result"] is result  # what Orchestrator.execute returns
    assert (result["status"], result["answer"]) == ("completed", "15")

    # a run that fails ends with the event too
    spy = Spy()
    failed = make_harness(["not a plan"], plugins=(spy,)).run()
    (end,) = spy.of("aeon_run_end")
    assert end["result"] is failed and failed["status"] == "failed"


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
