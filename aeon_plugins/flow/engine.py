"""A flow ready to run: ``Engine.from_config_dir(path)`` (spec 004 §8) and the Task result (§2.1).

:class:`FlowEngine` is a flow on an :class:`~aeon_kernel.engine.Engine`: the engine's model, tools, memory, state
store and sinks, with the flow's node code, memory layers and retrieval policies. Each ``run`` is a kernel
:class:`~aeon_kernel.runtime.run.Run` driven by a :class:`~aeon_plugins.flow.router.FlowScheduler` — the same
runtime, TTL, records, store and replay as ``aeon run``, another scheduler.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aeon_kernel.errors import OrchestrationError, RunStoreError, ValidationError
from aeon_plugins.flow.checks import Known
from aeon_plugins.flow.context import Layers, RetrievalPolicy
from aeon_plugins.flow.graph import Flow
from aeon_plugins.flow.loader import FlowError, load_flow
from aeon_plugins.flow.manifest import LAYERS, NodeSpec
from aeon_plugins.flow.nodes import NodeFunction
from aeon_plugins.flow.router import FlowScheduler, FlowSetup
from aeon_plugins.flow.yamlfile import Problem

if TYPE_CHECKING:
    from aeon_kernel import (
        Engine,
        Memory,
        Run,
        RunResult,
        ToolRegistry,
    )
    from aeon_kernel.kit import Approval, Registries


@dataclass(frozen=True)
class TaskResult:
    """How a flow run ended (spec 004 §2.1): the root task's status and output, its lineage, and the history."""

    run_id: str
    #: ``success``, ``failure`` or ``partial`` (spec 004 §3.4), or ``waiting``: the run waits for a person's
    #: approval of a call or a stage (decision 0021; ``aeon approve RUN_ID``)
    status: str
    output: Any
    message: str
    #: every task of the run: id, parent, lineage type, status, where it ended
    tasks: tuple[dict[str, Any], ...]
    #: one record per stage, in order (spec 004 §6)
    history: tuple[dict[str, Any], ...]
    #: where the history is kept: the run id, and the state store holding it (None: this process only)
    history_ref: dict[str, Any]
    run: RunResult = field(repr=False)

    def output_as(self, output_type: Any) -> Any:
        """The flow's output as ``output_type`` (a pydantic model, a TypedDict, a dataclass, a JSON Schema dict:
        :func:`aeon_kernel.output_types.output_type`); ``ValidationError`` saying where it does not fit."""
        from aeon_kernel import output_type as typed

        return typed(output_type).convert(self.output, self.run_id)

    def to_dict(self, *, history: bool = True) -> dict[str, Any]:
        result = self.run.to_dict()
        data = {
            "run_id": self.run_id,
            "status": self.status,
            "output": self.output,
            "message": self.message,
            "run_status": result["status"],
            "errors": result["errors"],
            "tasks": list(self.tasks),
            "history_ref": self.history_ref,
            "flow": result.get("flow"),
        }
        if history:
            data["history"] = list(self.history)
        return data


class FlowEngine:
    """One flow and the engine it runs on; build it with ``Engine.from_config_dir(path)``."""

    def __init__(
        self,
        engine: Engine,
        flow: Flow,
        functions: dict[str, NodeFunction],
        layers: Layers,
        policies: dict[str, RetrievalPolicy],
        owned: list[Memory],
    ) -> None:
        self.engine = engine
        self.flow = flow
        self.setup = FlowSetup(flow, functions, layers, policies, tuple(engine.policies))
        self._owned = owned
        #: the latest run's result, once it has ended
        self.result: TaskResult | None = None

    @classmethod
    def build(cls, engine: Engine, directory: str | Path) -> FlowEngine:
        """Spec 004 §8, in order, on an engine whose plugins are discovered (nothing is built yet)."""
        registries = engine.registries
        # 1-4: load the manifests, check the schemas and references, build the DAG, check its invariants.
        flow = load_flow(
            directory,
            Known(
                nodes=registries["nodes"].names(),
                tools=None,  # checked below, once the enabled tools are built (step 6)
                policies=registries["retrieval_policies"].names(),
                memory_backends=registries["memory_backends"].names(),
            ),
        )
        # 5: the memory layers (memory.yaml), each a backend; a layer not named uses the engine's memory.
        owned: list[Memory] = []
        backends: dict[Any, Memory] = {}
        for layer in LAYERS:
            choice = flow.memory.layers.get(layer)
            if choice is None:
                backends[layer] = engine.memory
            else:
                backend = registries["memory_backends"].create(choice.use, **(choice.model_extra or {}))
                owned.append(backend)
                backends[layer] = backend
        layers = Layers(flow.name, backends)
        # 6: the tools and the model adapter.
        tools = engine.tools
        problems = [
            Problem(
                "flow.yaml",
                f"names tool {name!r}, which is not enabled; have: {sorted(t.name for t in tools)}",
                flow.node_lines.get(node.id),
                f"nodes[{i}].tools",
                node.id,
            )
            for i, node in enumerate(flow.spec.nodes)
            for name in node.tools
            if tools.get(name) is None
        ]
        problems += [
            Problem("flow.yaml", problem, flow.node_lines.get(node.id), f"nodes[{i}].permissions", node.id)
            for i, node in enumerate(flow.spec.nodes)
            for problem in _permission_problems(node, tools)
        ]
        if problems:
            raise FlowError(str(directory), problems)
        if any(node.kind == "agent" for node in flow.spec.nodes):
            engine.llm  # noqa: B018 - built now, so a missing model is reported before any run
        else:  # no node asks the model: do not load one
            engine.components.without_model(f"flow {flow.name!r} has no agent nodes")
        # 7: the plugins' code the flow names: node implementations and retrieval policies.
        functions = node_functions(registries, flow)
        policies = {
            name: registries["retrieval_policies"].create(name)
            for name in registries["retrieval_policies"].names()
        }
        # 8: the engine.
        return cls(engine, flow, functions, layers, policies, owned)

    # --- runs --------------------------------------------------------------------------------------------------

    def start(
        self, value: Any, *, start: str | None = None, ttl: int | None = None, run_id: str | None = None
    ) -> Run:
        """A new run of the flow on ``value`` (the start node's input); step it, iterate it or execute it.
        ``run_id``: its id, chosen by the caller (``Orchestrator.start``)."""
        if start is not None and (start not in self.flow.nodes or self.flow.nodes[start].role != "start"):
            raise ValidationError(
                f"{start!r} is not a start node of flow {self.flow.name!r}: {list(self.flow.starts)}"
            )
        try:
            request = json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"the flow's input must be JSON: {exc}") from None
        orchestrator = self.engine.orchestrator(
            ttl or self.flow.ttl,
            scheduler=lambda: FlowScheduler(self.setup, start, json.loads(request)),
            manifest={"scheduler": "flow", "flow": self.flow.metadata()},
        )
        return orchestrator.start(request, run_id=run_id)

    def run(self, value: Any, *, start: str | None = None, ttl: int | None = None) -> TaskResult:
        """Run the flow on ``value`` to its end."""
        run = self.start(value, start=start, ttl=ttl)
        return self._drain(run, [])

    def stream(self, value: Any, *, start: str | None = None, ttl: int | None = None) -> Any:
        """The flow's run on ``value`` as its events (``Run.stream``; ``astream`` for asyncio): a StageFinished per
        stage; the last event's result has the root task (``result["task"]``)."""
        return self.start(value, start=start, ttl=ttl).stream()

    def astream(self, value: Any, *, start: str | None = None, ttl: int | None = None) -> Any:
        return self.start(value, start=start, ttl=ttl).astream()

    def iter(
        self, value: Any, *, start: str | None = None, ttl: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """Run the flow one stage at a time, yielding each stage's history record as it is written.

        ``result`` holds the :class:`TaskResult` once the iterator is exhausted.
        """
        run = self.start(value, start=start, ttl=ttl)
        yield from self._stages(run, [])

    def resume(
        self,
        run_id: str,
        *,
        take_over: bool = False,
        ttl: int | None = None,
        approval: Approval | None = None,
    ) -> TaskResult:
        """Continue an interrupted run of this flow from the state store, at the stage after the last committed.
        ``ttl``: give it that many more cycles (how a run whose TTL expired goes on; ``Orchestrator.start_resume``);
        ``approval``: the answer a waiting run waits for (decision 0021)."""
        run, history = self.start_resume(run_id, take_over=take_over, ttl=ttl, approval=approval)
        return self._drain(run, history)

    def iter_resume(
        self,
        run_id: str,
        *,
        take_over: bool = False,
        ttl: int | None = None,
        approval: Approval | None = None,
    ) -> Iterator[dict[str, Any]]:
        run, history = self.start_resume(run_id, take_over=take_over, ttl=ttl, approval=approval)
        yield from self._stages(run, history)

    def close(self) -> None:
        for backend in self._owned:
            backend.close()
        self.engine.close()

    def __enter__(self) -> FlowEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------------------------

    def start_resume(
        self,
        run_id: str,
        *,
        take_over: bool = False,
        ttl: int | None = None,
        approval: Approval | None = None,
    ) -> tuple[Run, list[dict[str, Any]]]:
        """An interrupted run of this flow, claimed from the state store and ready to continue (step or iterate
        it), with the history records of the stages it had committed; ``ttl``: with that many more cycles."""
        store = self.engine.state_store
        if store is None:
            raise OrchestrationError(
                'resuming a flow needs a state store: set [state] use = "sqlite" in aeon.toml'
            )
        stored = store.load(run_id)
        recorded = stored.manifest.get("flow")
        if not isinstance(recorded, dict) or recorded.get("name") != self.flow.name:
            raise RunStoreError(f"run {run_id!r} is not a run of flow {self.flow.name!r}")
        if recorded.get("hashes") != self.flow.hashes:
            changed = sorted(
                name
                for name in {*recorded.get("hashes", {}), *self.flow.hashes}
                if recorded.get("hashes", {}).get(name) != self.flow.hashes.get(name)
            )
            raise RunStoreError(
                f"flow {self.flow.name!r} changed since run {run_id!r} started ({', '.join(changed)}); a run resumes "
                "only on the manifests it started with: restore them, or start a new run"
            )
        orchestrator = self.engine.orchestrator(
            scheduler=lambda: FlowScheduler(self.setup),
            manifest={"scheduler": "flow", "flow": self.flow.metadata()},
        )
        run = orchestrator.start_resume(run_id, take_over=take_over, ttl=ttl, approval=approval)
        history = [stage for entry in stored.entries for stage in entry.stages]
        for record in history:  # the task layer of a memory that did not outlive the process (in_memory)
            if record.get("status") == "success" and self.flow.reads_task_layer:
                self.setup.layers.write_stage(
                    run_id,
                    record["task"],
                    record["seq"],
                    record["node"],
                    record["output"],
                    unless_present=True,
                )
        return run, history

    def _stages(self, run: Run, history: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        with run:
            for entry in run:
                for stage in entry.stages:
                    history.append(stage)
                    yield stage
        self.result = self._result(run, history)

    def drain(self, run: Run) -> TaskResult:
        """Run ``run`` (from :meth:`start`) to its end: the flow's result."""
        return self._drain(run, [])

    def _drain(self, run: Run, history: list[dict[str, Any]]) -> TaskResult:
        for _ in self._stages(run, history):
            pass
        assert self.result is not None
        return self.result

    def _result(self, run: Run, history: list[dict[str, Any]]) -> TaskResult:
        if run.result is None:
            raise OrchestrationError(
                f"run {run.run_id} was closed before it ended; resume it with `aeon flow resume`"
            )
        result = run.result
        ended = (
            "waiting" if result.status == "waiting" else "failure"
        )  # waiting: for a person (decision 0021)
        task = result.details.get("task") or {"status": ended, "output": None, "tasks": []}
        store = self.engine.state_store
        return TaskResult(
            run_id=result.run_id,
            status=task["status"],
            output=task["output"],
            message=result.message,
            tasks=tuple(task["tasks"]),
            history=tuple(history),
            history_ref={
                "run_id": result.run_id,
                "state_store": str(getattr(store, "path", "")) or None,
            },
            run=result,
        )


def node_functions(registries: Registries, flow: Flow) -> dict[str, NodeFunction]:
    """The code of every deterministic node, built from the plugins' factories with the node's options; a
    ``FlowError`` lists every node whose code cannot be built."""
    functions: dict[str, NodeFunction] = {}
    problems: list[Problem] = []
    for i, node in enumerate(flow.spec.nodes):
        if node.kind != "deterministic" or node.role == "exit":
            continue
        impl = node.impl or "identity"

        def problem(message: str, key: str = "options", node_id: str = node.id, index: int = i) -> None:
            line = flow.node_lines.get(node_id)
            problems.append(Problem("flow.yaml", message, line, f"nodes[{index}].{key}", node_id))

        factory = registries["nodes"].get(impl).factory
        try:
            inspect.signature(factory).bind(**node.options)
        except TypeError as exc:
            problem(f"node implementation {impl!r} cannot take the options {sorted(node.options)}: {exc}")
            continue
        except ValueError:  # no signature to check: let the call decide
            pass
        try:
            function = factory(**node.options)
        except Exception as exc:
            problem(f"node implementation {impl!r} could not be built: {type(exc).__name__}: {exc}")
            continue
        if not callable(function):
            problem(
                f"node implementation {impl!r} gave {type(function).__name__}, not fn(value, context)", "impl"
            )
            continue
        functions[node.id] = function
    if problems:
        raise FlowError(str(flow.directory), problems)
    return functions


def _permission_problems(node: NodeSpec, tools: ToolRegistry) -> list[str]:
    """What is wrong with a node's ``permissions``: a tool it does not list, or more than the tool was granted."""
    problems = []
    for name, wanted in node.permissions.items():
        tool = tools.get(name)
        if name not in node.tools:
            problems.append(f"gives permissions for tool {name!r}, which the node does not list in tools")
        elif tool is not None and set(wanted) - tool.granted:
            extra = sorted(set(wanted) - tool.granted)
            problems.append(
                f"gives tool {name!r} {extra}, which [tools.{name}] grant does not (it grants "
                f"{sorted(tool.granted) or 'nothing'}); a node may narrow a grant, never widen it"
            )
    return problems
