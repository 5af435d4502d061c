"""Many tasks at once (spec 004 §10.8/§10.12): ``Engine.submit``/``map``/``asubmit``/``amap`` on the local executor.

The model answers by request, not by order (tasks run in any order): a request is ``job {json}``, and the plan
it gets is ``steps`` calls of the ``nap`` tool (a short sleep that returns its value), with ``boom`` (a tool
that raises) or a ``nap`` too long for the task's deadline where the request says so.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aeon_kernel import (
    BackpressureError,
    ConfigError,
    Engine,
    FunctionTool,
    LLMAdapter,
    LLMResponse,
    ToolError,
    ValidationError,
    hookimpl,
)
from aeon_kernel.config import AeonConfig
from aeon_kernel.kit import LocalExecutor, TaskCancelledError
from aeon_kernel.runtime.executor import ExecutorSettings
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from tests.support.builders import plan, tool_step

OBJECT = {"type": "object"}


def job(word: str, *, steps: int = 2, nap: float = 0.0, boom: bool = False, key: str | None = None) -> str:
    """A request for the by-request model: ``steps`` naps returning ``word-i`` (the last one raising if ``boom``);
    ``key`` names the step ids (the same ids in every task make their memory keys collide but for the run)."""
    return "job " + json.dumps({"word": word, "steps": steps, "nap": nap, "boom": boom, "key": key})


class ByRequest(LLMAdapter):
    """Plans from the request in the prompt; counts the calls it is in at once (it must never be two)."""

    model_id = "by-request"

    def __init__(self) -> None:
        self.inside = 0
        self.most_inside = 0
        self.calls = 0

    def generate(
        self,
        prompt: str,
        system_prompt: str | None = None,
        max_tokens: int = 2048,
        temperature: float = 0.7,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> LLMResponse:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        try:
            time.sleep(0.001)  # long enough for another thread to come in, were calls not serialised
            spec = json.loads(re.findall(r"job (\{[^{}]*\})", prompt)[-1])
            self.calls += 1
        finally:
            self.inside -= 1
        key = spec["key"] or spec["word"]
        steps = [
            tool_step(
                f"{key}{i}",
                "boom" if spec["boom"] and i == spec["steps"] else "nap",
                {"seconds": spec["nap"], "value": f"{spec['word']}-{i}"},
            )
            for i in range(1, spec["steps"] + 1)
        ]
        return {"text": json.dumps(plan(*steps, goal=f"job {spec['word']}")), "usage": {}}


def nap(seconds: float, value: str) -> dict[str, Any]:
    time.sleep(seconds)
    return {"value": value}


def boom(seconds: float, value: str) -> dict[str, Any]:
    raise ToolError(f"boom on {value}")


class JobsPlugin:
    def __init__(self) -> None:
        self.model = ByRequest()

    @hookimpl
    def aeon_register_llm_adapters(self, register: Any) -> None:
        register("by_request", lambda: self.model)

    @hookimpl
    def aeon_register_tools(self, register: Any) -> None:
        for name, function in (("nap", nap), ("boom", boom)):
            register(
                name,
                lambda name=name, function=function: FunctionTool(
                    name=name,
                    description=f"{name} for a while",
                    input_schema=OBJECT,
                    output_schema=OBJECT,
                    function=function,
                ),
            )


def make_engine(plugin: JobsPlugin | None = None) -> Engine:
    # keep_runs: the tests read each run's step results back from memory after it ended
    config = AeonConfig().with_choice("llm", "by_request").with_choice("memory", "in_memory", keep_runs=True)
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    return Engine(config, plugins=[*builtins, plugin or JobsPlugin()], autoload=False)


@pytest.fixture
def engine() -> Iterator[Engine]:
    with make_engine() as built:
        yield built


def answer_of(result: dict[str, Any]) -> Any:
    return result["answer"]["value"] if isinstance(result["answer"], dict) else result["answer"]


# --- submit, result, map -------------------------------------------------------------------------------------------


def test_submit_returns_a_handle_whose_result_is_the_run_result(engine: Engine) -> None:
    handle = engine.submit(job("alpha"))
    result = handle.result(timeout=10)
    assert handle.status == "completed" and result["status"] == "completed"
    assert handle.run_id == result["run_id"] and answer_of(result) == "alpha-2"
    assert set(result) >= {"plan", "final_state", "errors", "message"}  # what engine.run returns
    assert handle.done() and handle.seconds > 0


def test_map_yields_every_index_once_as_tasks_end(engine: Engine) -> None:
    requests = [job(f"w{i}", nap=0.02 if i % 3 == 0 else 0.0) for i in range(12)]
    pairs = list(engine.map(requests, concurrency=4))
    assert sorted(index for index, _ in pairs) == list(range(12))
    for index, result in pairs:
        assert result["status"] == "completed" and answer_of(result) == f"w{index}-2"
    assert [index for index, _ in pairs] != list(range(12))  # they end in their own order, not the input's


def test_map_reads_its_input_lazily(engine: Engine) -> None:
    """A long (here endless) iterable costs no more than the tasks in flight: map takes items as room frees."""
    taken = []

    def endless() -> Iterator[str]:
        i = 0
        while True:
            taken.append(i)
            yield job(f"e{i}")
            i += 1

    results = engine.map(endless(), concurrency=2)
    for _ in range(5):
        next(results)
    results.close()  # cancels what is still in flight
    assert len(taken) <= 5 + 2 + 2 * 2 + 1  # yielded + running + queued + the one held back


def test_a_bad_request_is_its_own_error_result_in_map_and_raises_at_submit(engine: Engine) -> None:
    with pytest.raises(ValidationError, match="non-empty string"):
        engine.submit("   ")
    results = dict(engine.map([job("ok"), "", job("ok2")], concurrency=2))
    assert results[1]["status"] == "error" and "non-empty string" in results[1]["message"]
    assert results[0]["status"] == results[2]["status"] == "completed"


def test_flows_run_through_the_same_executor(tmp_path: Any) -> None:
    from tests.plugins.flow.test_engine import chain, write_flow

    directory = write_flow(
        tmp_path / "flow", chain({"id": "in", "role": "start"}, {"id": "out", "role": "exit"}, name="pass")
    )
    with (
        Engine.from_config_dir(directory, AeonConfig().with_choice("memory", "in_memory")) as flow,
        LocalExecutor(flow, concurrency=3) as executor,
    ):
        results = dict(executor.map([{"n": i} for i in range(9)]))
        with pytest.raises(ValidationError, match="must be JSON"):
            executor.submit({"n": float("nan")})
    assert sorted(results) == list(range(9))
    for index, result in results.items():
        assert result["status"] == "success" and result["output"] == {"n": index}
        assert result["run_status"] == "completed" and [s["node"] for s in result["history"]] == ["in", "out"]


# --- cancel ------------------------------------------------------------------------------------------------------


def test_a_cancelled_queued_task_never_starts(engine: Engine) -> None:
    with engine.executor(concurrency=1) as executor:
        first = executor.submit(job("slow", nap=0.2))
        queued = executor.submit(job("never"))
        assert queued.status == "queued" and queued.cancel()
        assert queued.status == "cancelled" and queued.run_id is None
        assert first.result(timeout=10)["status"] == "completed"
        with pytest.raises(TaskCancelledError, match="before it started"):
            queued.result()
        assert not first.cancel()  # it had ended
    assert engine.llm.adapter.calls == 1  # type: ignore[attr-defined]  # the cancelled task never asked the model


def test_a_running_task_stops_at_its_next_cycle_boundary(engine: Engine) -> None:
    handle = engine.submit(job("long", steps=10, nap=0.05))
    while handle.run_id is None or handle.status != "running":
        time.sleep(0.005)
    time.sleep(0.08)
    assert handle.cancel()
    outcome = handle.outcome(timeout=10)
    assert handle.status == "cancelled" and outcome["run_id"] == handle.run_id
    assert "cancelled after" in outcome["message"] and "can be resumed" in outcome["message"]
    with pytest.raises(TaskCancelledError):
        handle.result()


def test_closing_the_engine_cancels_what_it_still_runs() -> None:
    engine = make_engine()
    handles = [engine.submit(job(f"c{i}", steps=20, nap=0.02)) for i in range(8)]
    time.sleep(0.05)
    started = time.monotonic()
    engine.close()
    assert time.monotonic() - started < 2  # running tasks stopped at a cycle boundary, queued ones never ran
    assert {handle.status for handle in handles} == {"cancelled"}


# --- backpressure --------------------------------------------------------------------------------------------------


def test_a_full_queue_blocks_submit_until_a_worker_takes_a_task(engine: Engine) -> None:
    with engine.executor(concurrency=1, max_queued=1) as executor:
        executor.submit(job("a", nap=0.15))
        time.sleep(0.05)  # the worker holds "a"; the queue is empty
        executor.submit(job("b", nap=0.15))  # queued: the queue is now full
        started = time.monotonic()
        executor.submit(job("c"))  # waits until the worker takes "b" (then "c" fills the queue)
        assert time.monotonic() - started > 0.05
        with pytest.raises(BackpressureError, match="queue is full") as raised:
            executor.submit(job("d"), timeout=0.01)
        assert raised.value.max_queued == 1


def test_on_full_raise_refuses_at_once(engine: Engine) -> None:
    with engine.executor(concurrency=1, max_queued=2, on_full="raise") as executor:
        handles = [executor.submit(job("r0", nap=0.1))]
        while handles[0].status == "queued":
            time.sleep(0.001)
        handles += [executor.submit(job(f"r{i}", nap=0.05)) for i in (1, 2)]  # one running, two queued
        with pytest.raises(BackpressureError, match="raise max_queued"):
            executor.submit(job("over"))
        assert executor.stats() == {"queued": 2, "running": 1, "workers": 1}
        late = executor.submit(job("late"), block=True)  # the caller may still choose to wait
        assert [h.result(timeout=10)["status"] for h in (*handles, late)] == ["completed"] * 4


def test_settings_are_checked_and_read_from_the_executor_table() -> None:
    """``[executor]`` holds the chosen executor's options (``local`` by default): sizes, and what a full queue
    does; a bad value or an unknown key is a ConfigError when the executor is made."""
    assert ExecutorSettings(3).queue_size == 6
    with make_engine() as engine:
        assert isinstance(engine.make_executor(), LocalExecutor)
    chosen = (
        AeonConfig()
        .with_choice("llm", "by_request")
        .with_choice("executor", "local", max_queued=1, on_full="raise")
    )
    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    with Engine(chosen, plugins=[*builtins, JobsPlugin()], autoload=False) as engine:
        executor = engine.make_executor(concurrency=2)
        assert (executor.settings.concurrency, executor.settings.max_queued, executor.settings.on_full) == (
            2,
            1,
            "raise",
        )
    for options, message in (
        ({"concurrency": 0}, "executor's concurrency must be a positive integer"),
        ({"on_full": "drop"}, 'on_full must be "block" or "raise"'),
        (
            {"workers": 2},
            r"the executor 'local' \(from aeon.kernel\) cannot be built .* unexpected keyword argument 'workers'",
        ),
    ):
        chosen = AeonConfig().with_choice("executor", "local", **options)
        with Engine(chosen, autoload=False) as engine, pytest.raises(ConfigError, match=message):
            engine.make_executor()


class Inline(LocalExecutor):
    """A plugin's executor: one worker, and it counts the tasks it was given."""

    def __init__(self, source: Any, *, label: str = "inline") -> None:
        super().__init__(source, 1)
        self.label, self.given = label, 0

    def submit(self, item: Any, **options: Any) -> Any:
        self.given += 1
        return super().submit(item, **options)


def test_hook_aeon_register_executors() -> None:
    """``[executor] use = NAME`` picks a plugin's executor for ``submit`` and ``map``, built with the table's
    options and the engine as its source; a factory that returns no Executor is refused, naming it."""
    built: list[Inline] = []

    class Executors:
        @hookimpl
        def aeon_register_executors(self, register: Any) -> None:
            def inline(source: Any, **options: Any) -> Inline:
                built.append(Inline(source, **options))
                return built[-1]

            register("inline", inline)
            register("wrong", lambda source: object())

    builtins = [importlib.import_module(name) for name in BUILTIN_PLUGINS]
    chosen = AeonConfig().with_choice("llm", "by_request").with_choice("executor", "inline", label="mine")
    with Engine(chosen, plugins=[*builtins, JobsPlugin(), Executors()], autoload=False) as engine:
        assert answer_of(engine.submit(job("alpha")).result(timeout=10)) == "alpha-2"
        assert sorted(answer_of(r) for _, r in engine.map([job("b"), job("c")])) == ["b-2", "c-2"]
        assert [(executor.label, executor.given) for executor in built] == [("mine", 1), ("mine", 2)]
        providers = engine.registries["executors"].providers()
        assert providers["local"] == "aeon.kernel" and set(providers) == {"local", "inline", "wrong"}
    wrong = AeonConfig().with_choice("executor", "wrong")
    with (
        Engine(wrong, plugins=[Executors()], autoload=False) as engine,
        pytest.raises(
            ConfigError, match=r"the executor 'wrong' .* is not an instance of aeon_kernel\.Executor"
        ),
    ):
        engine.make_executor()


def test_a_shut_down_executor_takes_no_more_tasks(engine: Engine) -> None:
    executor = engine.executor(concurrency=2)
    handle = executor.submit(job("last"))
    executor.shutdown()  # without cancel, what was queued still runs
    assert handle.status == "completed"
    with pytest.raises(Exception, match="shut down"):
        executor.submit(job("late"))


# --- isolation ---------------------------------------------------------------------------------------------------


def test_model_calls_take_turns_while_tools_overlap() -> None:
    plugin = JobsPlugin()
    with make_engine(plugin) as engine:
        started = time.monotonic()
        results = dict(engine.map([job(f"t{i}", steps=1, nap=0.2) for i in range(4)], concurrency=4))
        took = time.monotonic() - started
    assert plugin.model.most_inside == 1  # never two model calls at once
    assert all(r["status"] == "completed" for r in results.values())
    assert took < 0.6  # four 0.2 s naps at once, not one after another (0.8 s)


def test_one_task_raising_timing_out_or_running_out_of_ttl_leaves_the_others_alone(engine: Engine) -> None:
    handles = {
        "raises": engine.submit(job("x", boom=True)),
        "deadline": engine.submit(job("y", steps=3, nap=0.15), deadline=0.05),
        "ttl": engine.submit(job("z", steps=5), ttl=3),
        **{f"fine{i}": engine.submit(job(f"f{i}", nap=0.01)) for i in range(5)},
    }
    results = {name: handle.outcome(timeout=10) for name, handle in handles.items()}
    assert results["raises"]["status"] == "failed"
    assert "boom on x-2" in json.dumps(results["raises"]["errors"])
    assert results["deadline"]["status"] == "failed"
    assert any(e["type"] == "DeadlineError" for e in results["deadline"]["errors"])
    assert results["ttl"]["status"] == "ttl_expired" == handles["ttl"].status
    for i in range(5):
        assert results[f"fine{i}"]["status"] == "completed" and answer_of(results[f"fine{i}"]) == f"f{i}-2"
        assert results[f"fine{i}"]["errors"] == []


def test_a_task_whose_run_cannot_start_is_an_error_and_the_worker_goes_on(engine: Engine) -> None:
    class Broken:
        """Tasks whose start raises for one item."""

        def check(self, item: Any) -> None: ...

        def start(self, item: Any, ttl: int | None) -> Any:
            if item == "bad":
                raise RuntimeError("no run for you")
            return engine.start(item, ttl)

        def conclude(self, run: Any, stages: list[dict[str, Any]]) -> dict[str, Any]:
            return dict(run.result.to_dict())

    with LocalExecutor(Broken(), concurrency=1) as executor:
        bad, good = executor.submit("bad"), executor.submit(job("after"))
        assert good.result(timeout=10)["status"] == "completed"
        assert bad.status == "error" and bad.outcome()["errors"][0]["type"] == "RuntimeError"
        with pytest.raises(RuntimeError, match="no run for you"):
            bad.result()


words = st.lists(
    # not "step": the step ids "step-1"... would read as that task's values
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8).filter(
        lambda word: word != "step"
    ),
    min_size=2,
    max_size=12,
    unique=True,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=words, concurrency=st.integers(1, 6), shared_key=st.sampled_from(["s", "step-"]))
def test_concurrent_tasks_writing_colliding_keys_keep_to_their_own_run(
    engine: Engine, words: list[str], concurrency: int, shared_key: str
) -> None:
    """Every task names its steps alike (``s1``, ``s2``...): each step's result is still kept under its own run's
    namespace, ``run/<run_id>/<step_id>``, and no task's state, history or answer holds another's value."""
    requests = [job(word, steps=3, nap=0.002, key=shared_key) for word in words]
    results = dict(engine.map(requests, concurrency=concurrency))
    assert sorted(results) == list(range(len(words)))
    run_ids = {result["run_id"] for result in results.values()}
    assert len(run_ids) == len(words)
    for index, result in results.items():
        word, others = words[index], [w for w in words if w != words[index]]
        assert result["status"] == "completed", result["message"]
        for i in (1, 2, 3):
            stored = engine.memory.read(f"run/{result['run_id']}/{shared_key}{i}")
            assert stored == {"value": f"{word}-{i}"}
        text = json.dumps(result)
        assert not [other for other in others if re.search(rf"\b{other}-\d", text)], word


# --- asyncio -------------------------------------------------------------------------------------------------------


def test_asubmit_and_amap_are_the_same_executor_awaited(engine: Engine) -> None:
    async def main() -> tuple[list[dict[str, Any]], dict[int, dict[str, Any]]]:
        singles = await asyncio.gather(*(engine.asubmit(job(f"a{i}", nap=0.02)) for i in range(3)))
        mapped = {index: result async for index, result in engine.amap([job("m0"), job("m1")], concurrency=2)}
        return list(singles), mapped

    singles, mapped = asyncio.run(main())
    assert [answer_of(r) for r in singles] == ["a0-2", "a1-2", "a2-2"]
    assert {i: answer_of(r) for i, r in mapped.items()} == {0: "m0-2", 1: "m1-2"}


def test_cancelling_the_awaiting_asyncio_task_cancels_the_aeon_task(engine: Engine) -> None:
    async def main() -> None:
        task = asyncio.create_task(engine.asubmit(job("long", steps=30, nap=0.02)))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert engine._executor is not None
    deadline = time.monotonic() + 5
    while engine._executor.stats()["running"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine._executor.stats()["running"] == 0  # stopped at a cycle boundary, long before its 30 naps


def test_a_done_callback_that_raises_harms_nothing(engine: Engine) -> None:
    handle = engine.submit(job("cb"))
    calls: list[str] = []
    handle.add_done_callback(lambda h: (_ for _ in ()).throw(RuntimeError("bad callback")))
    handle.add_done_callback(lambda h: calls.append(h.status))
    handle.wait(10)
    time.sleep(0.01)
    assert calls == ["completed"]
    handle.add_done_callback(lambda h: calls.append("late"))  # already ended: called at once
    assert calls == ["completed", "late"]
    assert engine.submit(job("next")).result(timeout=10)["status"] == "completed"  # the worker lives on
