"""Conformance suites: the contract of each component kind as tests any implementation can run on itself.

Apply one to your class in one line (LangGraph's checkpoint-conformance kit is the model)::

    TestMyMemory = memory_conformance(MyMemory)                # factory: () -> Memory
    TestMyTool = tool_conformance(MyTool)                      # factory: () -> Tool
    TestMyAdapter = llm_adapter_conformance(MyAdapter, failing=lambda: MyAdapter(base_url="http://127.0.0.1:9"))
    TestMySink = telemetry_sink_conformance(lambda: MySink(path=...))
    TestMyStore = state_store_conformance(lambda directory: MyStore(path=directory / "runs.db"))

Every built-in backend runs these suites too. The suites are plain pytest classes; the ``make_*`` helpers only
fill in the factory.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aeon_kernel.config import AeonConfig
from aeon_kernel.contracts import LLMAdapter, Memory, TelemetrySink
from aeon_kernel.engine import Engine
from aeon_kernel.errors import LLMError, MemoryStoreError, RunStoreError, ValidationError
from aeon_kernel.llm.client import ModelClient
from aeon_kernel.models import OrchestrationState
from aeon_kernel.plugins import build_plugin_manager
from aeon_kernel.runtime.store import RunOwner, StateStore
from aeon_kernel.schemas import check_schema, schema_errors
from aeon_kernel.testing.pytest_plugin import BUILTIN_PLUGINS
from aeon_kernel.tools import Tool, ToolRegistry

# --- Memory ----------------------------------------------------------------------------------------------------

#: what the memory suite searches for: the empty prefix, LIKE wildcards, non-ASCII
PREFIXES = ["", "a", "a%", "a_", "é", "日", "%", "_", "b"]
TRICKY_KEYS = [
    "a",
    "a%",
    "a_",
    "a%b",
    "a_b",
    "ab",
    "abc",
    "b",
    "é",
    "éa",
    "日本",
    "日本語",
    "a/b",
    "a b",
    "A",
    "%",
    "_",
]


class MemoryConformance:
    """Spec 002's Memory contract (FR-014…018) for any backend."""

    factory: ClassVar[Callable[[], Memory]]

    @pytest.fixture
    def memory(self) -> Any:
        backend = type(self).factory()
        yield backend
        backend.close()

    def test_write_then_read(self, memory: Memory) -> None:
        memory.write("k", {"nested": [1, 2.5, "x", None, True]})
        assert memory.read("k") == {"nested": [1, 2.5, "x", None, True]}

    def test_missing_key_reads_none(self, memory: Memory) -> None:
        assert memory.read("never-written") is None

    def test_overwrite_replaces(self, memory: Memory) -> None:
        memory.write("k", 1)
        memory.write("k", "two")
        assert memory.read("k") == "two"

    def test_prefix_search_is_exact_and_ordered(self, memory: Memory) -> None:
        for key in TRICKY_KEYS:
            memory.write(key, key)
        for prefix in ["a", "a%", "a_", "é", "日本", "%", "_", "A", "zz"]:
            expected = sorted((k, k) for k in TRICKY_KEYS if k.startswith(prefix))
            assert memory.search(prefix) == expected, prefix

    def test_empty_prefix_finds_everything(self, memory: Memory) -> None:
        for key in ["x", "y", "z"]:
            memory.write(key, 0)
        assert [k for k, _ in memory.search("")] == ["x", "y", "z"]

    def test_search_is_case_sensitive(self, memory: Memory) -> None:
        memory.write("Key", 1)
        memory.write("key", 2)
        assert memory.search("K") == [("Key", 1)]

    def test_release_never_touches_a_key_outside_its_prefix(self, memory: Memory) -> None:
        """A run ended (``Memory.release``): its keys may go (a durable backend keeps them), no other may."""
        for key in ["run/r1/1", "run/r1/2", "run/r10/1", "run/r2/1", "run/r"]:
            memory.write(key, key)
        memory.release("run/r1/")
        kept = [key for key, _ in memory.search("")]
        assert [key for key in kept if not key.startswith("run/r1/")] == ["run/r", "run/r10/1", "run/r2/1"]

    @pytest.mark.parametrize("value", [object(), {1, 2}, float("nan"), b"bytes"])
    def test_non_json_values_are_refused(self, memory: Memory, value: Any) -> None:
        with pytest.raises(MemoryStoreError):
            memory.write("bad", value)
        assert memory.read("bad") is None  # atomic: nothing half-written

    @pytest.mark.parametrize("key", ["", None, 5])
    def test_invalid_keys_are_refused(self, memory: Memory, key: Any) -> None:
        with pytest.raises(MemoryStoreError):
            memory.write(key, 1)

    # --- the optional atomic counter (skipped for backends that do not override ``increment``) ---

    @pytest.fixture
    def counter(self, memory: Memory) -> Memory:
        if type(memory).increment is Memory.increment:
            pytest.skip("the backend has no atomic increment")
        return memory

    def test_increment_counts_from_zero(self, counter: Memory) -> None:
        assert counter.increment("c") == 1
        assert counter.increment("c", 10) == 11
        assert counter.increment("c", -20) == -9
        assert counter.increment("d", 0) == 0
        assert counter.read("c") == -9
        assert counter.search("") == [("c", -9), ("d", 0)]

    def test_increment_continues_a_written_integer(self, counter: Memory) -> None:
        counter.write("c", 41)
        assert counter.increment("c") == 42

    @pytest.mark.parametrize("stored", [1.5, True, None, "1", [1], {"n": 1}])
    def test_increment_refuses_a_non_integer_and_changes_nothing(self, counter: Memory, stored: Any) -> None:
        counter.write("c", stored)
        with pytest.raises(MemoryStoreError):
            counter.increment("c")
        assert counter.read("c") == stored

    @pytest.mark.parametrize("amount", [True, 1.0, "1", None])
    def test_increment_refuses_bad_amounts(self, counter: Memory, amount: Any) -> None:
        with pytest.raises(MemoryStoreError):
            counter.increment("c", amount)
        assert counter.read("c") is None

    def test_concurrent_increments_lose_nothing(self, counter: Memory) -> None:
        threads = [
            threading.Thread(target=lambda: [counter.increment("n") for _ in range(200)]) for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert counter.read("n") == 800

    def test_behaves_like_a_dict(self) -> None:
        """A Hypothesis state machine: any sequence of writes, reads and searches agrees with a dict."""
        pytest.importorskip("hypothesis")
        from hypothesis import HealthCheck, settings
        from hypothesis import strategies as st
        from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

        factory = type(self).factory

        class Machine(RuleBasedStateMachine):
            def __init__(self) -> None:
                super().__init__()
                self.memory = factory()
                self.model: dict[str, Any] = {}

            @rule(key=st.sampled_from(TRICKY_KEYS), value=st.integers() | st.text(max_size=5) | st.none())
            def write(self, key: str, value: Any) -> None:
                self.memory.write(key, value)
                self.model[key] = value

            @rule(key=st.sampled_from([*TRICKY_KEYS, "missing"]))
            def read(self, key: str) -> None:
                assert self.memory.read(key) == self.model.get(key)

            @rule(prefix=st.sampled_from(PREFIXES))
            def search(self, prefix: str) -> None:
                assert self.memory.search(prefix) == sorted(
                    (k, v) for k, v in self.model.items() if k.startswith(prefix)
                )

            @invariant()
            def everything_written_is_there(self) -> None:
                # every prefix, after every step: a search that ignores its prefix is caught by any run that
                # writes (left to the search rule alone, 25 short runs now and then never tried one)
                for prefix in PREFIXES:
                    found = self.memory.search(prefix)
                    assert found == sorted((k, v) for k, v in self.model.items() if k.startswith(prefix))

            def teardown(self) -> None:
                self.memory.close()

        Machine.TestCase.settings = settings(
            max_examples=25,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        Machine.TestCase().runTest()


# --- Tool ------------------------------------------------------------------------------------------------------


class ToolConformance:
    """Spec 002's Tool contract: valid schemas, validated input, results that match ``output_schema``."""

    factory: ClassVar[Callable[[], Tool]]

    @pytest.fixture
    def tool(self) -> Tool:
        return type(self).factory()

    def test_is_a_tool_with_valid_schemas(self, tool: Tool) -> None:
        assert isinstance(tool, Tool) and tool.name and tool.description.strip()
        check_schema(tool.input_schema)
        check_schema(tool.output_schema)

    def test_schemas_describe_objects(self, tool: Tool) -> None:
        """Tools are called with keyword arguments and return a JSON object (the kernel enforces both)."""
        assert tool.input_schema.get("type") == "object"
        assert tool.output_schema.get("type") == "object"

    def test_example_is_valid_and_its_result_matches_the_output_schema(self, tool: Tool) -> None:
        if tool.example is None:
            pytest.skip("the tool declares no example")
        assert tool.validate_input(**tool.example)
        result = tool.invoke(**tool.example)
        assert isinstance(result, dict) and schema_errors(tool.output_schema, result) == []
        json.dumps(result)
        assert tool.invoke(**tool.example) == result, "invoke must be deterministic (spec 001)"

    def test_invalid_input_and_output_are_rejected(self, tool: Tool) -> None:
        if tool.input_schema.get("required"):
            with pytest.raises(ValidationError):
                tool.validate_input()
        with pytest.raises(ValidationError):
            tool.validate_output("not an object")  # type: ignore[arg-type]

    def test_is_listed_for_the_model(self, tool: Tool) -> None:
        (exported,) = ToolRegistry([tool]).export_tools_for_llm()
        assert {"name", "description", "input_schema", "output_schema"} <= set(exported)


# --- LLM adapter -----------------------------------------------------------------------------------------------


class LLMAdapterConformance:
    """Spec 002's LLMAdapter contract: the response format, streamed pieces that join up to the text, and
    failures that surface as LLMError."""

    factory: ClassVar[Callable[[], LLMAdapter]]
    #: Builds an adapter that cannot reach its model (e.g. a closed port); None skips the failure test.
    failing: ClassVar[Callable[[], LLMAdapter] | None] = None

    @pytest.fixture(scope="class")
    def adapter(self) -> Any:
        adapter = type(self).factory()
        yield adapter
        adapter.close()

    def test_response_format(self, adapter: LLMAdapter) -> None:
        response = adapter.generate("Say hello.", "Be brief.", max_tokens=16, temperature=0.0)
        assert isinstance(response, dict) and isinstance(response["text"], str)
        assert all(isinstance(v, int) for v in response.get("usage", {}).values())
        assert isinstance(response.get("model", ""), str)

    def test_declares_its_capabilities(self, adapter: LLMAdapter) -> None:
        assert isinstance(adapter.supports_json_schema, bool)
        assert isinstance(adapter.supports_streaming(), bool)
        assert isinstance(adapter.model_id, str) and adapter.model_id

    def test_streamed_pieces_join_up_to_the_text(self, adapter: LLMAdapter) -> None:
        pieces: list[str] = []
        response = adapter.stream("Say hello.", "Be brief.", 16, 0.0, on_text=pieces.append)
        assert isinstance(response, dict) and "".join(pieces) == response["text"]
        assert all(isinstance(v, int) for v in response.get("usage", {}).values())

    def test_constrained_output_matches_the_schema(self, adapter: LLMAdapter) -> None:
        if not adapter.supports_json_schema:
            pytest.skip("the adapter cannot constrain decoding")
        schema = {
            "type": "object",
            "properties": {"answer": {"type": "string", "maxLength": 20}},
            "required": ["answer"],
            "additionalProperties": False,
        }
        text = adapter.generate('Reply with {"answer": "yes"}.', None, 64, 0.0, json_schema=schema)["text"]
        assert schema_errors(schema, json.loads(text)) == []

    def test_failures_surface_as_llm_error_after_the_kernel_retries(self) -> None:
        if type(self).failing is None:
            pytest.skip("no failing factory given")
        failing = type(self).failing
        assert failing is not None
        client = ModelClient(failing(), initial_wait=0.01, max_wait=0.02)
        with pytest.raises(LLMError):
            client.generate("hello", max_tokens=4)


# --- Telemetry sink --------------------------------------------------------------------------------------------


class TelemetrySinkConformance:
    """A telemetry sink registers cleanly, receives a whole run, and closes (twice, safely)."""

    factory: ClassVar[Callable[[], TelemetrySink]]

    def test_implements_only_known_hooks(self) -> None:
        sink = type(self).factory()
        pm = build_plugin_manager([sink], autoload=False)
        assert pm.failures == [] and pm.is_registered(sink)
        assert pm.get_hookcallers(sink), "a sink should implement at least one event hook"
        sink.close()

    def test_survives_a_whole_run_and_closes(self) -> None:
        plan = {
            "goal": "g",
            "steps": [{"step_id": "1", "description": "d", "tool": "echo", "arguments": {"message": "hi"}}],
        }
        sink = type(self).factory()
        config = AeonConfig().with_choice("llm", "scripted", responses=[plan])
        engine = Engine(config, plugins=[importlib.import_module(n) for n in BUILTIN_PLUGINS], autoload=False)
        engine.pm.register(sink, name="sink:under-test")
        orchestrator = engine.orchestrator(5)
        result = orchestrator.execute("say hi")
        assert result["status"] == "completed"
        assert orchestrator.telemetry_errors == [], orchestrator.telemetry_errors
        sink.close()
        sink.close()


# --- State store ----------------------------------------------------------------------------------------------


class StateStoreConformance:
    """What ``aeon runs`` and ``aeon runs prune`` rely on: each run's owner and whether it is alive, a finished
    run's result, and deleting runs, never one a live claim holds. ``factory(directory)`` builds a store over the
    runs kept for ``directory`` (a file in it, a namespace named after it): two stores of one directory share them.
    """

    factory: ClassVar[Callable[[Path], StateStore]]

    @pytest.fixture
    def stores(self, tmp_path: Path) -> Iterator[Callable[[], StateStore]]:
        made: list[StateStore] = []

        def make() -> StateStore:
            made.append(type(self).factory(tmp_path))
            return made[-1]

        yield make
        for store in made:
            store.close()

    def _gone_owner(self, tmp_path: Path) -> tuple[str, int]:
        """A run created by a process that ended without letting go of it: its id and that process's pid."""
        run_id = uuid.uuid4().hex
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                type(self).factory(tmp_path).create_run(_state(run_id), {})
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        return run_id, pid

    def test_a_claimed_run_is_live_then_released(self, stores: Callable[[], StateStore]) -> None:
        store, state = stores(), _state()
        store.create_run(state, {})
        (summary,) = store.list_runs()
        assert summary.owner == RunOwner(os.getpid(), socket.gethostname()) and summary.liveness() == "live"
        store.release(state.run_id)
        (summary,) = store.list_runs()
        assert summary.owner == RunOwner(None, None) and summary.liveness() == "released"

    def test_a_run_whose_owner_is_gone_is_stale(
        self, stores: Callable[[], StateStore], tmp_path: Path
    ) -> None:
        run_id, pid = self._gone_owner(tmp_path)
        (summary,) = stores().list_runs()
        assert summary.owner == RunOwner(pid, socket.gethostname()) and summary.liveness() == "stale"
        assert stores().delete_run(run_id) and stores().list_runs() == []

    def test_a_finished_run_keeps_its_result_and_can_be_deleted(
        self, stores: Callable[[], StateStore]
    ) -> None:
        store, state = stores(), _state()
        store.create_run(state, {})
        result = {
            "run_id": state.run_id,
            "status": "completed",
            "answer": 15,
            "message": "ok",
            "final_state": {},
        }
        store.finish_run(state.model_copy(update={"status": "completed"}), result)
        assert store.load(state.run_id).result == {k: v for k, v in result.items() if k != "final_state"}
        (summary,) = store.list_runs()
        assert (summary.status, summary.owner, summary.liveness()) == (
            "completed",
            RunOwner(None, None),
            None,
        )
        assert stores().delete_run(state.run_id) is True
        assert store.list_runs() == [] and stores().delete_run(state.run_id) is False
        with pytest.raises(RunStoreError):
            store.load(state.run_id)

    def test_a_run_a_live_claim_holds_is_not_deleted(self, stores: Callable[[], StateStore]) -> None:
        holder, state = stores(), _state()
        holder.create_run(state, {})
        with pytest.raises(RunStoreError):
            stores().delete_run(state.run_id)
        assert [summary.run_id for summary in holder.list_runs()] == [state.run_id]
        holder.release(state.run_id)
        assert stores().delete_run(state.run_id)


def _state(run_id: str | None = None) -> OrchestrationState:
    return OrchestrationState(
        run_id=run_id or uuid.uuid4().hex,
        request="conformance",
        plan=None,
        current_step_id=None,
        tool_history=(),
        llm_outputs=(),
        supervisor_actions=(),
        errors=(),
        ttl_remaining=5,
        cycle=0,
        status="running",
        scheduler_state={},
    )


# --- one-line application --------------------------------------------------------------------------------------


def _suite(base: type, name: str, **attributes: Any) -> type:
    return type(
        name,
        (base,),
        {key: staticmethod(value) if callable(value) else value for key, value in attributes.items()},
    )


def memory_conformance(factory: Callable[[], Memory]) -> type:
    return _suite(
        MemoryConformance, f"TestMemoryConformance_{getattr(factory, '__name__', 'backend')}", factory=factory
    )


def tool_conformance(factory: Callable[[], Tool]) -> type:
    return _suite(
        ToolConformance, f"TestToolConformance_{getattr(factory, '__name__', 'tool')}", factory=factory
    )


def llm_adapter_conformance(
    factory: Callable[[], LLMAdapter], failing: Callable[[], LLMAdapter] | None = None
) -> type:
    return _suite(
        LLMAdapterConformance,
        f"TestLLMAdapterConformance_{getattr(factory, '__name__', 'adapter')}",
        factory=factory,
        failing=failing,
    )


def telemetry_sink_conformance(factory: Callable[[], TelemetrySink]) -> type:
    return _suite(
        TelemetrySinkConformance,
        f"TestTelemetrySinkConformance_{getattr(factory, '__name__', 'sink')}",
        factory=factory,
    )


def state_store_conformance(factory: Callable[[Path], StateStore]) -> type:
    return _suite(
        StateStoreConformance,
        f"TestStateStoreConformance_{getattr(factory, '__name__', 'store')}",
        factory=factory,
    )
