"""The Run (aeon_kernel/runtime/run.py): its API, its contract with a scheduler, and several runs on one engine."""

from __future__ import annotations

import importlib
import json
import threading
import time
from typing import Any

import pytest

from aeon_kernel import (
    Engine,
    LLMAdapter,
    LLMError,
    LLMResponse,
    LogEntry,
    OrchestrationError,
    Orchestrator,
    Run,
    RunContext,
    RunResult,
    Scheduler,
    Verdict,
    Work,
    hookimpl,
)
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import Components
from aeon_kernel.testing import RecordingSink
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_plugins.scripted import ScriptedLLM
from tests.conftest import MakeHarness
from tests.support.builders import answer, llm_step, plan, tool_step

SUM_PLAN = plan(tool_step("1", "calculator", {"expression": "5 + 10"}), llm_step("2"))


# --- the Run API -------------------------------------------------------------------------------------------------


def test_a_run_steps_one_cycle_per_next_and_ends_with_a_typed_result(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("The sum is 15")])
    run = h.orchestrator.start("calculate the sum of 5 and 10")
    assert isinstance(run, Run) and run.result is None and not run.done
    assert run.state.cycle == 0 and run.state.plan is None  # nothing happens before the first next()
    first = run.next()
    assert isinstance(first, LogEntry) and first.phase == "plan" and run.state.cycle == 1
    assert run.state.current_step_id == "1"
    entries = [first, run.next(), run.next()]
    assert [e.step_id for e in entries] == [None, "1", "2"]
    assert run.next() is None and run.done  # the call after the last cycle ends the run
    assert run.next() is None  # and stays ended
    result = run.result
    assert isinstance(result, RunResult)
    assert (result.status, result.answer, result.message) == (
        "completed",
        "The sum is 15",
        "every step completed",
    )
    assert result.state is run.state and result.state.status == "completed"
    assert result.convergence is not None and result.convergence.converged
    assert result.to_dict()["final_state"] == result.state.model_dump(mode="json")
    assert result.to_dict() is result.to_dict()  # built once, shared with the aeon_run_end sinks
    assert h.sink.of("aeon_run_end")[0] is result.to_dict()


def test_a_run_is_an_iterator_and_execute_drains_it(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15"), SUM_PLAN, answer("15")])
    iterated = list(h.orchestrator.start("add 5 and 10"))
    assert [e.step_number for e in iterated] == [1, 2, 3]
    result = h.orchestrator.start("add 5 and 10").execute()
    assert result.status == "completed" and result.state.cycle == 3


def test_the_result_dict_is_what_orchestrator_execute_returns(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15")])
    returned = h.orchestrator.execute("sum")
    assert h.orchestrator.run is not None and h.orchestrator.run.result is not None
    assert returned == h.orchestrator.run.result.to_dict()
    assert set(returned) == {
        "run_id",
        "status",
        "plan",
        "answer",
        "errors",
        "message",
        "convergence",
        "verification",
        "final_state",
    }


def test_telemetry_errors_belong_to_each_run(make_harness: MakeHarness) -> None:
    """They were kept on the orchestrator and never reset: a second, clean run reported the first one's."""

    class FailsOnce:
        def __init__(self) -> None:
            self.failed = False

        @hookimpl
        def aeon_run_start(self, run_id: str, request: str, state: Any, manifest: dict[str, Any]) -> None:
            if not self.failed:
                self.failed = True
                raise OSError("disk full")

    h = make_harness([SUM_PLAN, answer("15"), SUM_PLAN, answer("15")], plugins=(FailsOnce(),))
    first = h.orchestrator.start("sum")
    first.execute()
    second = h.orchestrator.start("sum")
    second.execute()
    assert [e["message"] for e in first.telemetry_errors] == ["disk full"]
    assert second.telemetry_errors == []


# --- the contract between a Run and its scheduler -----------------------------------------------------------------


class Countdown(Scheduler):
    """Three units of work, no plan: the runtime needs nothing from the plan package."""

    def __init__(self, units: int = 3, fail_on: int | None = None, error: Exception | None = None) -> None:
        self.left, self.done = units, 0
        self.fail_on, self.error = fail_on, error
        self.calls: list[str] = []

    def start(self, run: RunContext, *, resumed: bool) -> None:
        self.calls.append(f"start resumed={resumed}")

    def status(self, run: RunContext) -> Verdict | None:
        self.calls.append("status")
        return Verdict("completed") if self.left == 0 else None

    def next_work(self, run: RunContext) -> Work:
        self.calls.append("next_work")
        return Work("step", None)

    def perform(self, work: Work, run: RunContext) -> Any:
        self.calls.append("perform")
        if self.fail_on == self.done + 1 and self.error is not None:
            raise self.error
        return self.done + 1

    def apply(self, work: Work, outcome: Any, run: RunContext) -> None:
        self.calls.append(f"apply {outcome}")
        self.done, self.left = outcome, self.left - 1

    def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:
        self.calls.append(f"abandon {type(error).__name__}")
        self.done, self.left = self.done + 1, self.left - 1


def _run(scheduler: Scheduler, ttl: int = 10, plugins: tuple[Any, ...] = ()) -> tuple[Run, RecordingSink]:
    orchestrator = Orchestrator(
        ScriptedLLM([]),
        *_components(),
        ttl=ttl,
        scheduler=lambda: scheduler,
    )
    sink = RecordingSink()
    orchestrator.pm.register(sink)
    for plugin in plugins:
        orchestrator.pm.register(plugin)
    return orchestrator.start("count down"), sink


def _components() -> tuple[Any, ...]:
    from aeon_kernel import ToolRegistry
    from aeon_plugins.in_memory import InMemoryKVStore
    from aeon_plugins.schema_validator import SchemaValidator
    from aeon_plugins.supervisor import DefaultSupervisor

    validator, tools = SchemaValidator(), ToolRegistry()
    return InMemoryKVStore(), tools, DefaultSupervisor(ScriptedLLM([]), validator, tools), validator


def test_the_run_asks_the_scheduler_in_order_and_logs_every_cycle() -> None:
    countdown = Countdown()
    run, sink = _run(countdown)
    result = run.execute()
    assert result.status == "completed"
    cycle = ["status", "next_work", "perform"]
    assert countdown.calls == [
        "start resumed=False",
        *cycle,
        "apply 1",
        *cycle,
        "apply 2",
        *cycle,
        "apply 3",
        "status",
    ]
    assert [(e.step_number, e.ttl_remaining) for e in sink.entries] == [(1, 9), (2, 8), (3, 7)]
    assert result.answer is None and result.message == "completed"  # Scheduler.conclude's default


def test_the_run_ends_a_run_whose_ttl_is_spent() -> None:
    countdown = Countdown(units=5)
    run, sink = _run(countdown, ttl=2)
    result = run.execute()
    assert result.status == "ttl_expired" and countdown.done == 2 and len(sink.entries) == 2


def test_a_cycle_that_raises_is_abandoned_logged_and_the_run_goes_on() -> None:
    countdown = Countdown(fail_on=2, error=RuntimeError("boom"))
    run, sink = _run(countdown)
    result = run.execute()
    assert "abandon RuntimeError" in countdown.calls and "apply 2" not in countdown.calls
    assert result.status == "completed" and countdown.done == 3
    (error,) = sink.entries[1].errors
    assert error["type"] == "RuntimeError" and error["message"] == "boom"
    assert result.errors == (error,)


def test_a_scheduler_that_cannot_abandon_ends_the_run_failed() -> None:
    class Stuck(Countdown):
        def abandon(self, work: Work | None, error: BaseException, run: RunContext) -> None:
            raise RuntimeError("cannot settle")

    run, sink = _run(Stuck(fail_on=1, error=ValueError("boom")))
    result = run.execute()
    assert result.status == "failed" and len(sink.entries) == 1
    assert [(e["type"], e.get("phase")) for e in sink.entries[0].errors] == [
        ("ValueError", "step"),
        ("RuntimeError", "abandon"),
    ]


def test_an_unavailable_model_ends_the_run_failed() -> None:
    """FR-049: the run itself, not the scheduler, stops a run whose model stays unavailable."""
    countdown = Countdown(fail_on=1, error=LLMError("the model is unavailable after 3 attempts"))
    run, sink = _run(countdown)
    result = run.execute()
    assert result.status == "failed" and len(sink.entries) == 1
    assert countdown.calls[-1] == "abandon LLMError"  # the scheduler was not asked again


def test_a_resumed_run_tells_its_scheduler(tmp_path: Any) -> None:
    from aeon_plugins.sqlite_state import SqliteStateStore

    store = SqliteStateStore(tmp_path / "runs.db")
    countdown = Countdown(units=2)
    orchestrator = Orchestrator(
        ScriptedLLM([]), *_components(), state_store=store, scheduler=lambda: countdown
    )
    run = orchestrator.start("count down")
    assert run.next() is not None
    run.close()  # interrupted after one cycle: released, resumable
    again = Countdown(units=1)
    orchestrator.scheduler = lambda: again
    resumed = orchestrator.start_resume(run.run_id)
    assert resumed.execute().status == "completed"
    assert again.calls[0] == "start resumed=True"
    assert resumed.state.cycle == 2  # the count went on from the store
    store.close()


def test_a_run_may_start_with_the_id_its_caller_chose_but_never_a_stored_one(tmp_path: Any) -> None:
    """What makes a batch once-only on any executor: it journals the id it chose before the run starts, and a
    run the store already holds goes on only through start_resume, never as a second new run."""
    from aeon_kernel.errors import RunStoreError, ValidationError
    from aeon_kernel.orchestrator import is_run_id, new_run_id
    from aeon_plugins.sqlite_state import SqliteStateStore

    store = SqliteStateStore(tmp_path / "runs.db")
    orchestrator = Orchestrator(
        ScriptedLLM([]), *_components(), state_store=store, scheduler=lambda: Countdown(units=1)
    )
    chosen = new_run_id()
    run = orchestrator.start("count down", run_id=chosen)
    assert run.run_id == chosen and run.execute().status == "completed"
    assert store.load(chosen).state.status == "completed"
    with pytest.raises(RunStoreError, match="is stored already"):
        orchestrator.start("count down", run_id=chosen)
    for bad in ("f" * 32, chosen.upper(), "run-1", chosen[:-1], 7):
        assert not is_run_id(bad)
        with pytest.raises(ValidationError, match="is not a run id"):
            orchestrator.start("count down", run_id=bad)  # type: ignore[arg-type]
    assert len(store.list_runs()) == 1
    store.close()


# --- several runs of one engine -----------------------------------------------------------------------------------


class ByRequest(LLMAdapter):
    """Plans from the request text; a thread-safe model several runs can share."""

    model_id = "by-request"

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        time.sleep(0.02)  # long enough for runs in other threads to be inside a cycle too
        word = prompt.rsplit("Request: ", 1)[-1].split()[1]  # "echo <word> ..." (echo_request)
        steps = [tool_step(str(i), "echo", {"message": f"{word}-{i}"}) for i in range(1, 4)]
        return {"text": json.dumps(plan(*steps, goal=f"echo {word}")), "usage": {"prompt_tokens": len(word)}}


def echo_request(word: str) -> str:
    """The request ByRequest plans for: it echoes ``word``-1, -2 and -3, which the request states, so the echo's
    review approves the calls (decision 0018)."""
    return f"echo {word} three times: {word}-1, {word}-2, {word}-3"


class ByRequestPlugin:
    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("by_request", ByRequest)


def _engine(tmp_path: Any) -> Engine:
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    config = AeonConfig().with_choice("llm", "by_request")
    engine = Engine(config, plugins=[*builtins, ByRequestPlugin()], autoload=False)
    engine.add_sink("jsonl", path=str(tmp_path / "runs.jsonl"))
    return engine


def test_two_runs_of_one_engine_interleaved_keep_their_own_cycles(tmp_path: Any) -> None:
    with _engine(tmp_path) as engine:
        alpha, beta = engine.start(echo_request("alpha")), engine.start(echo_request("beta"))
        for _ in range(4):  # alternate: alpha, beta, alpha, beta, ... (a plan and three steps each)
            alpha.next()
            beta.next()
        for run, word in ((alpha, "alpha"), (beta, "beta")):  # each step's result under its own run's keys
            assert engine.memory.read(f"run/{run.run_id}/3") == {"message": f"{word}-3"}
        assert alpha.next() is None and beta.next() is None
        for run, word in ((alpha, "alpha"), (beta, "beta")):
            assert run.result is not None and run.result.status == "completed"
            state = run.state
            assert [c.result for c in state.tool_history] == [{"message": f"{word}-{i}"} for i in (1, 2, 3)]
            (plan_call,) = state.llm_outputs  # each run saw its own model call, not the other's
            assert word in plan_call["text"]
            assert engine.memory.search(f"run/{run.run_id}/") == []  # released when the run ended
    lines = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    cycles = [line for line in lines if "step_number" in line]
    for run in (alpha, beta):
        mine = [c for c in cycles if c["run_id"] == run.run_id]
        assert [c["step_number"] for c in mine] == [1, 2, 3, 4]
        assert [c["usage"]["llm_calls"] for c in mine] == [1, 0, 0, 0]


def test_runs_of_one_engine_in_parallel_threads(tmp_path: Any) -> None:
    with _engine(tmp_path) as engine:
        words = [f"w{i}" for i in range(6)]
        results: dict[str, Any] = {}
        barrier = threading.Barrier(len(words))

        def go(word: str) -> None:
            run = engine.start(echo_request(word))
            barrier.wait()
            results[word] = run.execute()

        threads = [threading.Thread(target=go, args=(word,)) for word in words]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for word in words:
            result = results[word]
            assert result.status == "completed", result.message
            assert result.answer == {"message": f"{word}-3"}
            (call,) = result.state.llm_outputs
            assert call["usage"] == {"prompt_tokens": len(word)}


def test_components_are_shared_and_hold_no_run(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15")])
    components = h.orchestrator.components
    assert isinstance(components, Components)
    h.orchestrator.execute("sum")
    with pytest.raises(AttributeError):
        components.llm = components.llm  # type: ignore[misc]  # frozen: nothing per run can land here


def test_a_failing_sink_does_not_keep_the_event_from_the_others(make_harness: MakeHarness) -> None:
    """pluggy stops a call at the first implementation that raises; the run calls each sink by itself."""

    class Broken:
        @hookimpl(tryfirst=True)  # called before the recording sink
        def aeon_run_end(self, run_id: str, result: dict[str, Any]) -> None:
            raise OSError("disk full")

        @hookimpl(tryfirst=True)
        def aeon_cycle_end(self, entry: LogEntry, state: Any) -> None:
            raise OSError("disk full")

    h = make_harness([SUM_PLAN, answer("15")], plugins=(Broken(),))
    run = h.orchestrator.start("sum")
    run.execute()
    assert len(h.sink.of("aeon_run_end")) == 1 and len(h.sink.entries) == 3
    assert len(run.telemetry_errors) == 4
    assert {(e["hook"], e["message"]) for e in run.telemetry_errors} == {
        ("aeon_run_end", "disk full"),
        ("aeon_cycle_end", "disk full"),
    }
    assert all(e["plugin"].startswith("Broken") for e in run.telemetry_errors)


def test_a_verdict_ends_a_run_or_says_nothing() -> None:
    with pytest.raises(ValueError, match="running"):
        Verdict("running")


def test_a_closed_run_refuses_to_go_on(make_harness: MakeHarness) -> None:
    h = make_harness([SUM_PLAN, answer("15")])
    run = h.orchestrator.start("sum")
    run.next()
    run.close()
    with pytest.raises(OrchestrationError, match="closed"):
        run.next()


@pytest.mark.parametrize("stage", ["start", "status", "conclude"])
def test_a_scheduler_bug_outside_a_cycle_ends_the_run_with_a_record(stage: str) -> None:
    class Buggy(Countdown):
        def start(self, run: RunContext, *, resumed: bool) -> None:
            if stage == "start":
                raise KeyError("start bug")

        def status(self, run: RunContext) -> Verdict | None:
            if stage == "status":
                raise KeyError("status bug")
            return super().status(run)

        def conclude(self, state: Any, verdict: Verdict) -> Any:
            raise KeyError("conclude bug")

    run, _ = _run(Buggy(units=1))
    result = run.execute()
    assert result.status == ("completed" if stage == "conclude" else "failed")
    phases = [e.get("phase") for e in result.errors]
    assert f"scheduler.{stage}" in phases and "scheduler.conclude" in phases
    assert "could not conclude" in result.message
