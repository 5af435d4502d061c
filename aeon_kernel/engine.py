"""The Engine: one plugin manager, its registries, the components ``aeon.toml`` selects from them, and runs.

It only wires: the components are built, once and on first use, by :class:`~aeon_kernel.components.ComponentSet`
from the kinds table; each run is a :class:`~aeon_kernel.runtime.run.Run` of an
:class:`~aeon_kernel.orchestrator.Orchestrator` on them; many runs at once go to the executor ``[executor]``
chooses. One Engine can drive many runs, several of them active at once; closing it closes what it built.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aeon_kernel.components import ComponentSet
from aeon_kernel.config import AeonConfig, load_config
from aeon_kernel.errors import ConfigError
from aeon_kernel.hookspecs import HOOKSPEC_VERSION
from aeon_kernel.version import __version__

# The rest of the kernel is imported when a component or a run is first needed, so that writing
# ``from aeon_kernel import Engine`` costs little more than pydantic and pluggy (bench/kernel_split.py).
if TYPE_CHECKING:
    from collections.abc import Callable

    from aeon_kernel.contracts import ConvergenceEngine, Memory, Planner, Supervisor, TelemetrySink, Validator
    from aeon_kernel.llm.client import ModelClient
    from aeon_kernel.models import Plan
    from aeon_kernel.orchestrator import Orchestrator
    from aeon_kernel.plugins import AeonPluginManager
    from aeon_kernel.policy import Policy
    from aeon_kernel.runtime.artifacts import ArtifactStore
    from aeon_kernel.runtime.executor import Executor, LocalExecutor, OnFull
    from aeon_kernel.runtime.run import Run
    from aeon_kernel.runtime.scheduler import Scheduler
    from aeon_kernel.runtime.store import StateStore
    from aeon_kernel.runtime.stream import AsyncRunStream, RunStream
    from aeon_kernel.runtime.tasks import TaskHandle
    from aeon_kernel.tools import Tool, ToolRegistry

T = TypeVar("T")
#: held while an engine makes its shared executor (``submit``)
_SHARED_EXECUTOR = threading.Lock()


class _Component(Generic[T]):
    """An engine attribute (``engine.memory``, ...): the component ``aeon.toml`` chooses for a kind, built once."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __get__(self, engine: Engine, owner: type[Engine] | None = None) -> T:
        component: T = engine.components.one(self.kind)
        return component


class Engine:
    """Builds runs from configuration and plugins.

    :param config: an :class:`AeonConfig`, a path to ``aeon.toml``, or None for the lookup order.
    :param plugins: plugin objects to register in addition to (or, with ``autoload=False``, instead of) the
        ``aeon`` entry points.
    :param autoload: whether to load entry-point plugins (default: yes, unless ``AEON_DISABLE_PLUGIN_AUTOLOAD``).
    :param record: append every model request and response to this cassette file.
    :param replay: serve model responses from this cassette instead of the configured model (which is not loaded).
    :param tools: tools (``@aeon_kernel.tool`` functions, any :class:`Tool`) registered as a plugin's would be.
    """

    def __init__(
        self,
        config: AeonConfig | str | None = None,
        *,
        plugins: Iterable[Any] = (),
        autoload: bool | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
    ) -> None:
        if record is not None and replay is not None:
            raise ConfigError("choose one of record and replay")
        if tools:
            from aeon_kernel.tools import GivenTools

            plugins = (*plugins, GivenTools(tools))
        self.record, self.replay = record, replay
        self.config = config if isinstance(config, AeonConfig) else load_config(config)
        #: what a Ray worker's engine registers too (``[executor] use = "ray"``)
        self._given_plugins, self._autoload = tuple(plugins), autoload
        from aeon_kernel.plugins import Registries, build_plugin_manager

        self.pm: AeonPluginManager = build_plugin_manager(
            self._given_plugins, autoload=autoload, allow=self.config.allow, block=self.config.block
        )
        self.registries = Registries(self.pm)
        self.components = ComponentSet(self.config, self.registries, self.pm, record=record, replay=replay)
        self._manifest_parts: tuple[int, list[dict[str, Any]], str] | None = None
        self._executor: Executor | None = None  # what submit() uses, made on first use ([executor])

    @classmethod
    def from_config_dir(
        cls,
        path: str | Path,
        config: AeonConfig | str | None = None,
        *,
        plugins: Iterable[Any] = (),
        autoload: bool | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
        flow_engine: str = "flow",
    ) -> Any:
        """The flow in directory ``path`` ready to run (spec 004 §8), built by the flow engine registered as
        ``flow_engine`` (``aeon_plugins.flow``'s :class:`~aeon_plugins.flow.engine.FlowEngine` by default): its
        manifests loaded and checked, its memory layers, tools, model and node code built. ``config`` defaults to
        ``path/aeon.toml`` when there is one, else the usual lookup. Raises ``FlowError`` listing every problem
        of the flow."""
        if config is None and (Path(path) / "aeon.toml").is_file():
            config = str(Path(path) / "aeon.toml")
        engine = cls(config, plugins=plugins, autoload=autoload, record=record, replay=replay)
        try:
            return engine.registries["flow_engines"].create(flow_engine, engine=engine, directory=path)
        except BaseException:
            engine.close()
            raise

    # --- components (aeon_kernel/components.py builds them) ------------------------------------------------------

    @property
    def llm(self) -> ModelClient:
        return self.components.llm

    #: the component ``aeon.toml`` chooses for each kind, built on first use
    memory: _Component[Memory] = _Component("memory_backends")
    validator: _Component[Validator] = _Component("validators")
    supervisor: _Component[Supervisor] = _Component("supervisors")
    convergence: _Component[ConvergenceEngine] = _Component("convergence_engines")
    planner: _Component[Planner] = _Component("planners")
    #: the stores ``[state]`` and ``[artifacts]`` name, or None (runs kept in memory only; outputs not kept)
    state_store: _Component[StateStore | None] = _Component("state_stores")
    artifact_store: _Component[ArtifactStore | None] = _Component("artifact_stores")

    @property
    def tools(self) -> ToolRegistry:
        return self.components.tools

    @property
    def policies(self) -> list[tuple[str, Policy]]:
        """The policies ``[policy] use`` names; once built, every tool call on this engine is judged by them."""
        return self.components.policies

    def scheduler(self) -> Scheduler:
        """A new scheduler of the kind ``[scheduler]`` chooses (one per run)."""
        scheduler: Scheduler = self.components.factory("schedulers")()
        return scheduler

    def add_sink(self, name: str, **options: Any) -> TelemetrySink:
        """Build a registered telemetry sink and register it on this engine's plugin manager."""
        return self.components.add_sink(name, **options)

    # --- runs --------------------------------------------------------------------------------------------------

    def orchestrator(
        self,
        ttl: int | None = None,
        *,
        scheduler: Callable[[], Scheduler] | None = None,
        manifest: dict[str, Any] | None = None,
        deadline: float | None = None,
    ) -> Orchestrator:
        """A new orchestrator on this engine's components (sinks from ``[telemetry]`` are attached once).

        ``scheduler`` builds each run's scheduler instead of the one ``[scheduler]`` chooses (a flow's router);
        ``manifest`` is added to the run manifest; ``deadline`` is the seconds each run may take.
        """
        from aeon_kernel.orchestrator import Orchestrator

        parts = self.components
        for attach in parts.configured_sinks():
            attach()
        parts.policies  # noqa: B018 - built before any run, so that every tool call is judged
        self.artifact_store  # noqa: B018 - and every output kept, when [artifacts] says where
        return Orchestrator(
            parts.llm,
            self.memory,
            parts.tools,
            self.supervisor,
            self.validator,
            ttl=ttl or self.config.ttl,
            convergence=self.convergence
            if scheduler is None
            else None,  # a flow's router judges its own runs
            plugin_manager=self.pm,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            manifest={
                **self.manifest(),
                "scheduler": self.config.choice("scheduler").use,
                **(manifest or {}),
            },
            state_store=self.state_store,
            planner=self.planner,  # built once per engine (a flow's runs never ask it)
            scheduler=scheduler or parts.factory("schedulers"),
            deadline=deadline,
        )

    def manifest(self) -> dict[str, Any]:
        """What a run on this engine depends on; the JSONL sink writes it as the run's first line."""
        # Every run asks for it: the plugin list and the config hash are kept until a plugin comes or goes.
        if self._manifest_parts is None or self._manifest_parts[0] != self.pm.generation:
            from aeon_kernel.plugins import loaded_plugins

            self._manifest_parts = (self.pm.generation, loaded_plugins(self.pm), self.config.fingerprint())
        _, plugins, fingerprint = self._manifest_parts
        cassette = (
            {"record": str(self.record)}
            if self.record
            else {"replay": str(self.replay)}
            if self.replay
            else None
        )
        manifest: dict[str, Any] = {
            "aeon_version": __version__,
            "hookspec_version": HOOKSPEC_VERSION,
            "plugins": [dict(plugin) for plugin in plugins],  # a copy: a hook may keep or change its manifest
            "config_fingerprint": fingerprint,
            "llm": self.config.choice("llm").use,  # the adapter chosen (a replay answers for it)
            "model": self.llm.model_id,
            "model_fingerprint": getattr(self.llm.adapter, "fingerprint", None),  # the weights' hash (§10.2)
            "cassette": cassette,
        }
        if self._project is not None:  # a project `aeon init` wrote: its template and whether its lock holds
            manifest["project"] = dict(self._project)
        return manifest

    @cached_property
    def _project(self) -> dict[str, Any] | None:
        """The project ``aeon init`` made here, read once per engine (:mod:`aeon_kernel.project`)."""
        from aeon_kernel.project import deployment_project

        return deployment_project(self.config)

    def start(
        self,
        request: str,
        ttl: int | None = None,
        initial_plan: Plan | dict[str, Any] | None = None,
        *,
        deadline: float | None = None,
        run_id: str | None = None,
        output_type: Any = None,
    ) -> Run:
        """A new run of ``request``; several may be active at once (step each with ``next()``). ``deadline``: the
        seconds it may take (checked between cycles); ``run_id``, ``output_type``: see ``Orchestrator.start``."""
        orchestrator = self.orchestrator(ttl, deadline=deadline)
        return orchestrator.start(request, initial_plan, run_id=run_id, output_type=output_type)

    def run(
        self, request: str, ttl: int | None = None, *, deadline: float | None = None, output_type: Any = None
    ) -> dict[str, Any]:
        """Convenience: one orchestrator, one request, the result dict; ``output_type`` (a pydantic model, a
        TypedDict, a dataclass, a JSON Schema) adds a checked ``output`` of that type (``Orchestrator.execute``)."""
        return self.orchestrator(ttl, deadline=deadline).execute(request, output_type=output_type)

    def stream(
        self, request: str, ttl: int | None = None, *, deadline: float | None = None, output_type: Any = None
    ) -> RunStream:
        """:meth:`run`, as the events of the run while it happens (``for event in engine.stream(...)``; the
        result is the last event's and ``stream.result``); ``Run.stream`` streams a resumed run or a flow's."""
        return self.start(request, ttl, deadline=deadline, output_type=output_type).stream()

    def astream(
        self, request: str, ttl: int | None = None, *, deadline: float | None = None, output_type: Any = None
    ) -> AsyncRunStream:
        """:meth:`stream` for asyncio: ``async for event in engine.astream(request)``."""
        return self.start(request, ttl, deadline=deadline, output_type=output_type).astream()

    def resume(self, run_id: str, *, take_over: bool = False, ttl: int | None = None) -> dict[str, Any]:
        """Continue an interrupted run from the state store to the end; the result dict (``take_over``: see
        ``Orchestrator.start_resume``). ``ttl``: give it that many more cycles, recorded in its history — how a run
        whose TTL expired is continued; a completed or failed run cannot be."""
        return self._resumed(run_id, take_over=take_over, ttl=ttl)

    def approve(self, run_id: str, arguments: dict[str, Any] | None = None, by: str = "") -> dict[str, Any]:
        """Approve the call the ``waiting`` run ``run_id`` waits on (``arguments``: edited) and continue it here to
        the end, whichever process asked (decision 0021); the result dict."""
        from aeon_kernel.approvals import Approval

        return self._resumed(run_id, approval=Approval(arguments=arguments, by=by))

    def deny(self, run_id: str, reason: str, by: str = "") -> dict[str, Any]:
        """Refuse the call the run waits on: it fails with ``reason``, and the run goes on to its end."""
        from aeon_kernel.approvals import Approval

        return self._resumed(run_id, approval=Approval.deny(reason, by))

    def _resumed(self, run_id: str, **options: Any) -> dict[str, Any]:
        orchestrator = self.orchestrator()
        for _ in orchestrator.resume(run_id, **options):
            pass
        assert orchestrator.result is not None
        return orchestrator.result

    # --- many runs at once (spec 004 §10.8): the executor [executor] chooses ------------------------------------

    def make_executor(self, source: Any = None, **overrides: Any) -> Executor:
        """A new executor of the kind ``[executor]`` chooses (``local`` threads by default, ``ray`` workers, a
        plugin's), running tasks on ``source`` (this engine, or a flow built on it) with ``[executor]``'s options,
        ``overrides`` that are not None going first."""
        choice = self.config.choice("executor")
        options = {**choice.resolved_options(self.components.secret_provider)}
        options.update({key: value for key, value in overrides.items() if value is not None})
        executor: Executor = self.registries["executors"].create(choice.use, source=source or self, **options)
        return executor

    def executor(
        self, concurrency: int = 4, *, max_queued: int | None = None, on_full: OnFull = "block"
    ) -> LocalExecutor:
        """A new pool of ``concurrency`` worker threads running requests on this engine, with a queue of at most
        ``max_queued`` waiting (default: twice ``concurrency``). Shut it down, or use it with ``with``."""
        from aeon_kernel.runtime.executor import LocalExecutor

        return LocalExecutor(self, concurrency, max_queued=max_queued, on_full=on_full)

    def submit(
        self,
        request: str,
        *,
        ttl: int | None = None,
        deadline: float | None = None,
        block: bool | None = None,
    ) -> TaskHandle:
        """Run ``request`` in the background on this engine's shared executor (``[executor]``; default 4 worker
        threads, 8 queued; it waits for room, or with ``block=False`` raises BackpressureError); the handle gives
        its status and result."""
        return self._shared_executor().submit(request, ttl=ttl, deadline=deadline, block=block)

    async def asubmit(
        self, request: str, *, ttl: int | None = None, deadline: float | None = None
    ) -> dict[str, Any]:
        """``submit``, awaited: the run's result dict."""
        return await self._shared_executor().asubmit(request, ttl=ttl, deadline=deadline)

    def _shared_executor(self) -> Executor:
        with _SHARED_EXECUTOR:  # two first submits at once make one executor, not two
            if self._executor is None:
                self._executor = self.make_executor()
            return self._executor

    def map(
        self,
        requests: Iterable[str],
        *,
        concurrency: int | None = None,
        ttl: int | None = None,
        deadline: float | None = None,
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Run every request, ``concurrency`` at once (default: ``[executor]``'s, else 4), yielding ``(index,
        result)`` as each ends; on a new executor of the kind ``[executor]`` chooses, shut down at the end."""
        from aeon_kernel.runtime.executor import map_on

        return map_on(self.make_executor(concurrency=concurrency), requests, ttl=ttl, deadline=deadline)

    def amap(
        self,
        requests: Iterable[str],
        *,
        concurrency: int | None = None,
        ttl: int | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """``map`` for asyncio: ``async for index, result in engine.amap(requests)``."""
        from aeon_kernel.runtime.executor import amap_on

        return amap_on(self.make_executor(concurrency=concurrency), requests, ttl=ttl, deadline=deadline)

    # --- checks ------------------------------------------------------------------------------------------------

    def describe_plugins(self) -> dict[str, Any]:
        from aeon_kernel.plugins import describe_plugins

        return describe_plugins(self.pm, self.registries)

    def build_selected(self) -> None:
        """Build every component ``aeon.toml`` selects now, raising the first that cannot be built, so that a run
        fails before it starts (``aeon run`` exits with status 2) rather than in its middle."""
        for _, _, build in self.components.selected():
            build()

    def check_components(self) -> list[dict[str, Any]]:
        """Build every component ``aeon.toml`` selects, as ``aeon run`` would — the model included — and describe
        each one that cannot be built (``aeon plugins --check``; :meth:`ComponentSet.problems`)."""
        return self.components.problems()

    def check_choices(self) -> None:
        """Fail early, listing what is available, when aeon.toml names a component no plugin registered."""
        self.components.check_choices()

    def close(self) -> None:
        if self._executor is not None:  # queued tasks never start; running ones stop at a cycle boundary
            self._executor.shutdown(cancel=True)
        self.components.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
