"""The Engine: one plugin manager, its registries, and the components ``aeon.toml`` selects from them.

Components are built on first use, so ``aeon plugins`` or ``aeon tools`` never loads a model (``aeon plugins
--check`` builds everything on purpose: :meth:`Engine.check_components`). Each is built by its registry, which
turns a factory's failure or a result of the wrong type into a ``ConfigError`` naming it. One Engine can
create many orchestrators and runs, several of them active at once (``engine.start(request)`` returns a
:class:`~aeon_kernel.runtime.run.Run`); closing it closes the model, memory and sinks it built.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aeon_kernel.config import AeonConfig, Choice, load_config, resolve_secrets
from aeon_kernel.errors import AeonError, ConfigError, ToolRegistrationError, UnknownComponentError
from aeon_kernel.hookspecs import HOOKSPEC_VERSION
from aeon_kernel.kinds import BY_NAME, KINDS, ROLES
from aeon_kernel.plugins import (
    AeonPluginManager,
    Registries,
    build_plugin_manager,
    describe_plugins,
    loaded_plugins,
)
from aeon_kernel.version import __version__

# The rest of the kernel is imported when a component or a run is first needed, so that writing
# ``from aeon_kernel import Engine`` costs little more than pydantic and pluggy (bench/README.md, W3).
if TYPE_CHECKING:
    from aeon_kernel.contracts import (
        ConvergenceEngine,
        LLMAdapter,
        Memory,
        Planner,
        SecretProvider,
        Supervisor,
        TelemetrySink,
        Validator,
    )
    from aeon_kernel.llm.client import ModelClient
    from aeon_kernel.models import Plan
    from aeon_kernel.orchestrator import Orchestrator
    from aeon_kernel.policy import Policy
    from aeon_kernel.runtime.artifacts import ArtifactStore
    from aeon_kernel.runtime.executor import Executor, LocalExecutor, OnFull
    from aeon_kernel.runtime.run import Run
    from aeon_kernel.runtime.scheduler import Scheduler
    from aeon_kernel.runtime.store import StateStore
    from aeon_kernel.runtime.tasks import TaskHandle
    from aeon_kernel.tools import Tool, ToolRegistry


#: held while an engine makes its shared executor (``submit``)
_SHARED_EXECUTOR = threading.Lock()
#: the kinds :meth:`Engine.check_components` builds by their own properties, before the others
_BUILT_FIRST = frozenset({"llm_adapters", "validators", "memory_backends", "supervisors", "schedulers"})


class Engine:
    """Builds orchestrators from configuration and plugins.

    :param config: an :class:`AeonConfig`, a path to ``aeon.toml``, or None for the lookup order.
    :param plugins: plugin objects to register in addition to (or, with ``autoload=False``, instead of) the
        ``aeon`` entry points.
    :param autoload: whether to load entry-point plugins (default: yes, unless ``AEON_DISABLE_PLUGIN_AUTOLOAD``).
    :param record: append every model request and response to this cassette file.
    :param replay: serve model responses from this cassette instead of the configured model (which is not loaded).
    """

    def __init__(
        self,
        config: AeonConfig | str | None = None,
        *,
        plugins: Iterable[Any] = (),
        autoload: bool | None = None,
        record: str | Path | None = None,
        replay: str | Path | None = None,
    ) -> None:
        if record is not None and replay is not None:
            raise ConfigError("choose one of record and replay")
        self.record, self.replay = record, replay
        self.config = config if isinstance(config, AeonConfig) else load_config(config)
        #: what a Ray worker's engine registers too (``[executor] use = "ray"``)
        self._given_plugins, self._autoload = tuple(plugins), autoload
        self.pm: AeonPluginManager = build_plugin_manager(
            self._given_plugins, autoload=autoload, allow=self.config.allow, block=self.config.block
        )
        self.registries = Registries(self.pm)
        self._llm: ModelClient | None = None
        self._memory: Memory | None = None
        self._tools: ToolRegistry | None = None
        #: the tools built so far, by registered name: built once, whether for a run or for a check
        self._built_tools: dict[str, list[Tool]] = {}
        self._validator: Validator | None = None
        self._supervisor: Supervisor | None = None
        self._convergence: ConvergenceEngine | None = None
        self._planner: Planner | None = None
        self._new_scheduler: Callable[[], Scheduler] | None = None
        self._components: dict[str, Any] = {}
        self._sinks: list[TelemetrySink] = []
        self._policies: list[tuple[str, Policy]] | None = None
        self._secret_providers: dict[str, SecretProvider] = {}
        self._configured_sinks_attached = False
        self._state_store: StateStore | None = None
        self._artifact_store: ArtifactStore | None = None
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

    # --- components, built on first use ------------------------------------------------------------------------

    def _factory(
        self,
        role: str,
        defaults: dict[str, Any] | None = None,
        offered: dict[str, Any] | None = None,
        **deps: Any,
    ) -> Callable[[], Any]:
        """How to build the component ``[role]`` chooses: ``deps``, its options, ``defaults`` they override, and the
        ``offered`` dependencies its factory names."""
        choice: Choice = self.config.choice(role)
        options = {**(defaults or {}), **choice.resolved_options(self._secret_provider)}
        return self.registries[ROLES[role].name].bound(choice.use, offered, **deps, **options)

    def _create(
        self,
        role: str,
        defaults: dict[str, Any] | None = None,
        offered: dict[str, Any] | None = None,
        **deps: Any,
    ) -> Any:
        return self._factory(role, defaults, offered, **deps)()

    def _model_deps(self) -> dict[str, Any]:
        """What a model-backed component may ask for: the run's model (retrying), validator and supervisor."""
        return {"llm": self.llm, "validator": self.validator, "supervisor": self.supervisor}

    def component(self, kind: str) -> Any:
        """The component ``aeon.toml`` chooses for ``kind`` (a ``one`` kind of :mod:`aeon_kernel.kinds`), built once.

        Its factory gets the run's model, validator and supervisor when it names them (``llm``, ``validator``,
        ``supervisor``), and ``max_tokens``/``temperature`` from ``[run]``.
        """
        if kind not in self._components:
            section = BY_NAME[kind].section
            settings = {"max_tokens": self.config.max_tokens, "temperature": self.config.temperature}
            self._components[kind] = self._create(section, offered={**self._model_deps(), **settings})
        return self._components[kind]

    @property
    def llm(self) -> ModelClient:
        if self._llm is None:
            from aeon_kernel.llm.cassette import RecordingAdapter, ReplayAdapter
            from aeon_kernel.llm.client import ModelClient

            adapter: LLMAdapter
            if self.replay is not None:
                adapter = ReplayAdapter(self.replay)
            else:
                adapter = self._create("llm")
                if self.record is not None:
                    adapter = RecordingAdapter(adapter, self.record)
            self._llm = ModelClient(adapter)
        return self._llm

    def without_model(self, reason: str) -> None:
        """Runs on this engine never ask a model (a flow without agent nodes): none is loaded, and a call fails
        saying ``reason``."""
        from aeon_kernel.llm.client import ModelClient, NoModel

        if self._llm is None:
            self._llm = ModelClient(NoModel(reason))

    @property
    def memory(self) -> Memory:
        if self._memory is None:
            self._memory = self._create("memory")
        return self._memory

    @property
    def validator(self) -> Validator:
        if self._validator is None:
            self._validator = self._create("validator")
        return self._validator

    @property
    def supervisor(self) -> Supervisor:
        if self._supervisor is None:
            self._supervisor = self._create(
                "supervisor", llm=self.llm, validator=self.validator, tools=self.tools
            )
        return self._supervisor

    @property
    def convergence(self) -> ConvergenceEngine:
        if self._convergence is None:
            self._convergence = self.component("convergence_engines")
        return self._convergence

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = self.component("planners")
        return self._planner

    def scheduler(self) -> Scheduler:
        """A new scheduler of the kind ``[scheduler]`` chooses (one per run)."""
        if self._new_scheduler is None:
            self._new_scheduler = self._factory("scheduler")
        scheduler: Scheduler = self._new_scheduler()
        return scheduler

    @property
    def tools(self) -> ToolRegistry:
        """Every registered tool, or only those ``[tools] enabled`` lists; a tool that declares permissions only
        when ``[tools.<name>] grant`` grants some (issue 17: the default is deny)."""
        if self._tools is None:
            from aeon_kernel.tools import ToolRegistry

            names = self._tool_names()
            for name in sorted(set(self.config.tool_options) - set(names)):
                self._unused_tool_options(name)
            tools = ToolRegistry()
            for name in names:
                for tool in self._tool(name):
                    tools.register(tool)
            self._tools = tools
        return self._tools

    def tool_overview(self) -> list[dict[str, Any]]:
        """Every registered tool: whether runs get it (and why not), the permissions it declares and those granted,
        and the tools it stands for (a toolset's members) — ``aeon tools --all``."""
        self.tools  # noqa: B018 - builds what runs get, so _built_tools holds it
        enabled = self._tool_names()
        overview = []
        for name in self.registries["tools"].names():
            members = self._built_tools.get(name, [])
            declared = _declared_permissions(self.registries["tools"].get(name).factory)
            if declared is None:
                declared = members[0].permissions if members else {}
            entry: dict[str, Any] = {
                "name": name,
                "on": bool(members),
                "permissions": declared,
                "granted": sorted(members[0].granted) if members else [],
                "tools": [tool.name for tool in members],
            }
            if name not in enabled:
                entry["why_off"] = "not in [tools] enabled"
            elif not members and declared:
                entry["why_off"] = f"nothing granted: add grant = [...] to [tools.{name}]"
            overview.append(entry)
        return overview

    def _tool_names(self) -> list[str]:
        enabled = self.config.tools_enabled
        return list(enabled) if enabled is not None else self.registries["tools"].names()

    def _unused_tool_options(self, name: str) -> None:
        """A ``[tools.<name>]`` table for a tool that is not built (misspelt, or not enabled) is a ConfigError: its
        options would otherwise be ignored without a word."""
        registry = self.registries["tools"]
        why = (
            "is not in [tools] enabled"
            if name in registry
            else f"no loaded plugin registers (registered: {', '.join(registry.names()) or 'none'})"
        )
        raise ConfigError(f"[tools.{name}] sets options for the tool {name!r}, which {why}")

    def _tool(self, name: str) -> list[Tool]:
        """The tools registered as ``name`` — one, or a toolset's members (``name.*``, an MCP server's tools) —
        built with the ``[tools.<name>]`` options and ``grant``, once (an MCP server is started once). A tool that
        declares permissions is not built at all (``[]``) while nothing grants it any; asked for without a grant,
        it is a ConfigError."""
        if name not in self._built_tools:
            self._built_tools[name] = self._build_tool(name)
        return self._built_tools[name]

    def _build_tool(self, name: str) -> list[Tool]:
        registry = self.registries["tools"]
        options = dict(self.config.tool_options.get(name, {}))
        grant = _grant(name, options.pop("grant", None))
        declared = _declared_permissions(registry.get(name).factory)
        if declared and not grant:
            return self._ungranted(name, declared)
        if grant:
            options["granted"] = grant
        built = registry.create(name, **resolve_secrets(options, name, self._secret_provider))
        tools: list[Tool] = list(built) if isinstance(built, (list, tuple)) else [built]
        for tool in tools:
            if tool.name != name and not (
                isinstance(built, (list, tuple)) and tool.name.startswith(f"{name}.")
            ):
                raise ToolRegistrationError(
                    f"the factory registered as tool {name!r} by {registry.get(name).provider} returned "
                    f"{tool.name!r}; it must return a Tool named {name!r} (or a list of tools named {name}.*)"
                )
            if tool.granted != (grant or frozenset()):
                raise ToolRegistrationError(
                    f"the factory registered as tool {name!r} by {registry.get(name).provider} did not keep the "
                    f"permissions granted to it ({sorted(grant or ())}); it must pass granted= on to the Tool"
                )
            if tool.permissions and not tool.granted:
                return self._ungranted(name, tool.permissions)
        return tools

    def _ungranted(self, name: str, permissions: dict[str, str]) -> list[Tool]:
        """A tool that needs a grant and has none: left off, or a ConfigError when aeon.toml asks for it."""
        if name not in (self.config.tools_enabled or ()) and name not in self.config.tool_options:
            return []  # off by default: nothing was granted
        listing = "; ".join(f"{p!r}: {what}" for p, what in sorted(permissions.items()))
        raise ConfigError(
            f"the tool {name!r} can do nothing until it is granted some of its permissions ({listing}): "
            f"add grant = [...] to [tools.{name}] in aeon.toml"
        )

    @property
    def state_store(self) -> StateStore | None:
        """The store ``[state]`` names, or None: runs are then kept in memory only."""
        if self._state_store is None and self.config.state is not None:
            choice = self.config.state
            self._state_store = self.registries["state_stores"].create(
                choice.use, **choice.resolved_options(self._secret_provider)
            )
        return self._state_store

    @property
    def artifact_store(self) -> ArtifactStore | None:
        """The store ``[artifacts]`` names, or None. Once built, every cycle's outputs and every run's answer on
        this engine go into it (:class:`~aeon_kernel.runtime.artifacts.ArtifactCollector`)."""
        if self._artifact_store is None and self.config.artifacts is not None:
            from aeon_kernel.runtime.artifacts import ArtifactCollector

            choice = self.config.artifacts
            self._artifact_store = self.registries["artifact_stores"].create(
                choice.use, **choice.resolved_options(self._secret_provider)
            )
            self.pm.register(ArtifactCollector(self._artifact_store), name="aeon.artifacts")
        return self._artifact_store

    def _secret_provider(self, name: str) -> SecretProvider | None:
        """The secret provider a plugin registered as ``name`` (built once), or None when none did."""
        if name not in self._secret_providers:
            registry = self.registries["secret_providers"]
            if name not in registry:
                return None
            self._secret_providers[name] = registry.create(name)
        return self._secret_providers[name]

    @property
    def policies(self) -> list[tuple[str, Policy]]:
        """The policies ``[policy] use`` names, as ``(name, policy)``, built once; from then on every tool call on
        this engine is judged by them first (:class:`~aeon_kernel.policy.PolicyGate`)."""
        if self._policies is None:
            from aeon_kernel.policy import PolicyGate

            registry = self.registries["policies"]
            self._policies = [
                (choice.use, registry.create(choice.use, **choice.resolved_options(self._secret_provider)))
                for choice in self.config.policies
            ]
            if self._policies:
                self.pm.register(PolicyGate(self._policies), name="aeon.policy")
        return self._policies

    def add_sink(self, name: str, **options: Any) -> TelemetrySink:
        """Build a registered telemetry sink and register it on this engine's plugin manager."""
        sink: TelemetrySink = self.registries["telemetry_sinks"].create(name, **options)
        self.pm.register(sink, name=f"sink:{name}:{len(self._sinks)}")
        self._sinks.append(sink)
        return sink

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

        if not self._configured_sinks_attached:
            self._configured_sinks_attached = True
            for choice in self.config.telemetry:
                self.add_sink(choice.use, **choice.resolved_options(self._secret_provider))
        self.policies  # noqa: B018 - built before any run, so that every tool call is judged
        self.artifact_store  # noqa: B018 - and every output kept, when [artifacts] says where
        return Orchestrator(
            self.llm,
            self.memory,
            self.tools,
            self.supervisor,
            self.validator,
            ttl=ttl or self.config.ttl,
            # a scheduler given here (a flow's router) judges its runs itself: no plan judge or planner to build
            convergence=self.convergence if scheduler is None else None,
            plugin_manager=self.pm,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            manifest={
                **self.manifest(),
                "scheduler": self.config.choice("scheduler").use,
                **(manifest or {}),
            },
            state_store=self.state_store,
            planner=self.planner if scheduler is None else None,
            scheduler=scheduler or self.scheduler,
            others=self.component,
            deadline=deadline,
        )

    def manifest(self) -> dict[str, Any]:
        """What a run on this engine depends on; the JSONL sink writes it as the run's first line."""
        # Every run asks for it: the plugin list and the config hash are kept until a plugin comes or goes.
        if self._manifest_parts is None or self._manifest_parts[0] != self.pm.generation:
            self._manifest_parts = (self.pm.generation, loaded_plugins(self.pm), self.config.fingerprint())
        _, plugins, fingerprint = self._manifest_parts
        manifest: dict[str, Any] = {
            "aeon_version": __version__,
            "hookspec_version": HOOKSPEC_VERSION,
            "plugins": [dict(plugin) for plugin in plugins],  # a copy: a hook may keep or change its manifest
            "config_fingerprint": fingerprint,
            "llm": self.config.choice("llm").use,  # the adapter chosen (a replay answers for it)
            "model": self.llm.model_id,
            "cassette": {"record": str(self.record)}
            if self.record
            else {"replay": str(self.replay)}
            if self.replay
            else None,
        }
        if self._project is not None:  # a project `aeon init` wrote: its template and whether its lock holds
            manifest["project"] = dict(self._project)
        return manifest

    @cached_property
    def _project(self) -> dict[str, Any] | None:
        """The ``aeon-project.toml`` beside the configuration file, else in the working directory, as run manifests
        record it; read once per engine (``aeon init``, docs/deploy.md)."""
        folders = [self.config.source.parent] if self.config.source is not None else []
        for folder in [*folders, Path()]:
            if (folder / _PROJECT_FILE).is_file():
                return _deployment_project(folder)
        return None

    def start(
        self,
        request: str,
        ttl: int | None = None,
        initial_plan: Plan | dict[str, Any] | None = None,
        *,
        deadline: float | None = None,
    ) -> Run:
        """A new run of ``request``; several may be active at once (step each with ``next()``). ``deadline``: the
        seconds it may take (checked between cycles)."""
        return self.orchestrator(ttl, deadline=deadline).start(request, initial_plan)

    def run(self, request: str, ttl: int | None = None, *, deadline: float | None = None) -> dict[str, Any]:
        """Convenience: one orchestrator, one request, the result dict."""
        return self.orchestrator(ttl, deadline=deadline).execute(request)

    def resume(self, run_id: str, *, take_over: bool = False) -> dict[str, Any]:
        """Continue an interrupted run from the state store to the end; the result dict (``take_over``: see
        ``Orchestrator.start_resume``)."""
        orchestrator = self.orchestrator()
        for _ in orchestrator.resume(run_id, take_over=take_over):
            pass
        assert orchestrator.result is not None
        return orchestrator.result

    # --- many runs at once (spec 004 §10.8; aeon_kernel/runtime/executor.py) ----------------------------------

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
                from aeon_plugins.ray.executor import configured_executor

                self._executor = configured_executor(self)  # as [executor] says: threads, or Ray workers
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
        result)`` as each ends; on a new executor of the kind ``[executor]`` chooses."""
        from aeon_plugins.ray.executor import map_configured

        return map_configured(self, requests, concurrency=concurrency, ttl=ttl, deadline=deadline)

    def amap(
        self,
        requests: Iterable[str],
        *,
        concurrency: int | None = None,
        ttl: int | None = None,
        deadline: float | None = None,
    ) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """``map`` for asyncio: ``async for index, result in engine.amap(requests)``."""
        from aeon_plugins.ray.executor import amap_configured

        return amap_configured(self, requests, concurrency=concurrency, ttl=ttl, deadline=deadline)

    def describe_plugins(self) -> dict[str, Any]:
        return describe_plugins(self.pm, self.registries)

    def _selected(self) -> list[tuple[str, str, Callable[[], object]]]:
        """``(kind, name, build)`` for every component ``aeon.toml`` selects, in an order that builds what each
        depends on first; the configured sinks are attached by their ``build``."""
        config = self.config
        scheduler = config.choice("scheduler").use
        wanted: list[tuple[str, str, Callable[[], object]]] = [
            ("llm_adapters", config.choice("llm").use, lambda: self.llm),
            ("validators", config.choice("validator").use, lambda: self.validator),
            ("memory_backends", config.choice("memory").use, lambda: self.memory),
        ]
        names = self._tool_names()
        wanted += [("tools", name, partial(self._tool, name)) for name in names]
        unused = sorted(set(config.tool_options) - set(names))
        wanted += [("tools", name, partial(self._unused_tool_options, name)) for name in unused]
        wanted.append(("supervisors", config.choice("supervisor").use, lambda: self.supervisor))
        for kind in KINDS:  # the planner, the convergence engine, and what the scheduler asks for
            if kind.selection != "one" or kind.name in _BUILT_FIRST:
                continue
            if kind.used_by in (None, scheduler) or kind.section in config.explicit:
                wanted.append(
                    (kind.name, config.choice(kind.section).use, partial(self.component, kind.name))
                )
        wanted.append(("schedulers", scheduler, self.scheduler))
        if config.state is not None:
            wanted.append(("state_stores", config.state.use, lambda: self.state_store))
        if config.artifacts is not None:
            wanted.append(("artifact_stores", config.artifacts.use, lambda: self.artifact_store))
        wanted += [("policies", choice.use, lambda: self.policies) for choice in config.policies]
        if not self._configured_sinks_attached:  # as orchestrator() would attach them
            self._configured_sinks_attached = True
            for choice in config.telemetry:
                attach = partial(
                    lambda c: self.add_sink(c.use, **c.resolved_options(self._secret_provider)), choice
                )
                wanted.append(("telemetry_sinks", choice.use, attach))
        return wanted

    def build_selected(self) -> None:
        """Build every component ``aeon.toml`` selects now, raising the first that cannot be built, so that a run
        fails before it starts (``aeon run`` exits with status 2) rather than in its middle (a multi-pass run
        builds its depth heuristic and semantic validator only when it first needs them)."""
        for _, _, build in self._selected():
            build()

    def check_components(self) -> list[dict[str, Any]]:
        """Build every component ``aeon.toml`` selects, as ``aeon run`` would — the model included, however long
        loading it takes — and describe each one that cannot be built (``aeon plugins --check``).

        Each problem is listed once, even when other components depend on the broken one (the supervisor on the
        model, say). An entry has the keys of a plugin load error (``plugin``, ``distribution``, ``stage`` =
        ``"build"``, ``error``) and the component's ``kind`` and ``name``. What was built is closed with the engine.
        """
        wanted = self._selected()
        problems: list[dict[str, Any]] = []
        seen: set[str] = set()
        for kind_name, name, build in wanted:
            try:
                build()
            except AeonError as exc:
                message = str(exc)
                if message in seen:
                    continue  # a dependency's failure, reported once
                seen.add(message)
                provider = self.registries[kind_name].providers().get(name)
                source = self.pm.sources.get(provider) if provider else None
                problems.append(
                    {
                        "plugin": provider,
                        "distribution": source.distribution if source else None,
                        "stage": "build",
                        "kind": kind_name,
                        "name": name,
                        "error": message,
                    }
                )
        return problems

    def check_choices(self) -> None:
        """Fail early, listing what is available, when aeon.toml names a component no plugin registered."""
        config = self.config
        scheduler = config.choice("scheduler").use
        for kind in KINDS:
            registry = self.registries[kind.name]
            if kind.used_by not in (None, scheduler) and kind.section not in config.explicit:
                continue  # a kind only another scheduler uses
            if kind.selection == "one" and (kind.section != "llm" or self.replay is None):
                registry.get(config.choice(kind.section).use)
            elif kind.selection == "many":
                for choice in config.chosen(kind.section):
                    registry.get(choice.use)
            elif kind.selection == "optional" and (chosen := config.optional(kind.section)) is not None:
                registry.get(chosen.use)
            elif kind.selection == "subset":
                for name in config.tools_enabled or ():
                    if name not in registry:
                        raise UnknownComponentError(kind.name, name, registry.providers())

    def close(self) -> None:
        if self._executor is not None:  # queued tasks never start; running ones stop at a cycle boundary
            self._executor.shutdown(cancel=True)
        for sink in self._sinks:
            sink.close()
        for tool in (tool for built in self._built_tools.values() for tool in built):
            close = getattr(tool, "close", None)
            if callable(close):  # a tool holding a connection or a process (an MCP server's session)
                close()
        if self._memory is not None:
            self._memory.close()
        if self._state_store is not None:
            self._state_store.close()
        if self._artifact_store is not None:
            self._artifact_store.close()
        if self._llm is not None:
            self._llm.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


#: what ``aeon init`` writes beside ``aeon.toml``: the project's template and the sha256 of its lock file
_PROJECT_FILE = "aeon-project.toml"


def _deployment_project(folder: Path) -> dict[str, Any]:
    """``{template, lock_sha256, lock_matches}`` of the project in ``folder``: lock_matches says whether the lock
    file (``lock``, default requirements.txt) still has the sha256 recorded when the project was made. A file
    that cannot be read is recorded as such rather than failing the run."""
    import hashlib
    import tomllib

    path = folder / _PROJECT_FILE
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("project")
        project = table if isinstance(table, dict) else {}
        lock = project.get("lock")
        lock_file = folder / (lock if isinstance(lock, str) and lock else "requirements.txt")
        current = hashlib.sha256(lock_file.read_bytes()).hexdigest() if lock_file.is_file() else None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {"error": f"cannot read {path}: {exc}"}
    template, recorded = project.get("template"), project.get("lock_sha256")
    return {
        "template": template if isinstance(template, str) else None,
        "lock_sha256": recorded if isinstance(recorded, str) else None,
        "lock_matches": current is not None and current == recorded,
    }


def _grant(name: str, grant: Any) -> frozenset[str] | None:
    """``[tools.<name>] grant`` as a set of permission names (None when absent)."""
    if grant is None:
        return None
    if not isinstance(grant, list) or not all(isinstance(p, str) and p for p in grant):
        raise ConfigError(f"[tools.{name}] grant must be a list of permission names, got {grant!r}")
    return frozenset(grant)


def _declared_permissions(factory: Any) -> dict[str, str] | None:
    """The permissions a tool factory declares without being called: a Tool class's ``permissions`` default, or a
    ``permissions`` attribute on any other factory (None when it does not say)."""
    from aeon_kernel.tools import Tool

    if isinstance(factory, type) and issubclass(factory, Tool):
        declared = factory.model_fields["permissions"].default
    else:
        declared = getattr(factory, "permissions", None)
    return declared if isinstance(declared, dict) else None
